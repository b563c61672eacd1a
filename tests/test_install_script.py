"""llama.cpp is built for the machine's CPU class, never for the build host alone (scripts/_llama.sh).

A native build faults on machines that advertise AMX inside a VM (and one built on an AVX-512 host dies with
SIGILL on an AVX2-only one), and pip's wheel cache hands a native wheel to every later install. These tests read
the machine code actually installed, and run the install step against a venv that already holds a foreign
llama-cpp-python 0.3.36, as pip would have left it from its cache.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from inference.runtime import cpu_flags

ROOT = Path(__file__).resolve().parent.parent
VENV = Path(sys.prefix)
AMX = re.compile(r"\b(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdpb\w+)\b")
AVX512 = re.compile(r"%zmm|%k[1-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b|vpternlog")


def _llama(*commands: str, **env: str) -> str:
    script = "source scripts/_llama.sh\n" + "\n".join(commands)
    done = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), **env})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def test_the_installed_llama_cpp_runs_no_amx_and_nothing_this_cpu_lacks():
    import llama_cpp

    assert (VENV / ".llama-build-key").read_text().strip() == _llama("llama_build_key")
    libraries = sorted((Path(llama_cpp.__file__).parent / "lib").glob("*.so"))
    assert any(lib.name == "libggml-cpu.so" for lib in libraries)
    has_avx512 = {"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"} <= cpu_flags()
    for library in libraries:
        code = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        assert not AMX.search(code), f"{library.name} uses AMX"
        assert has_avx512 or not AVX512.search(code), f"{library.name} uses AVX-512, which this CPU lacks"
    info = llama_cpp.llama_print_system_info().decode()
    assert "AVX2 = 1" in info and "AMX" not in info and ("AVX512 = 1" in info) == has_avx512


def test_the_wheel_directory_is_keyed_by_version_and_flags():
    here = _llama("llama_wheel_dir")
    portable = _llama("llama_wheel_dir", RAG_LLAMA_PORTABLE="1")
    native = _llama("llama_wheel_dir", RAG_LLAMA_CMAKE_ARGS="-DGGML_NATIVE=ON")
    assert "llama-cpp-python-0.3.36-" in here and native not in (here, portable)
    baseline = _llama("llama_cmake_args", RAG_LLAMA_PORTABLE="1")
    assert "-DGGML_NATIVE=OFF" in baseline and "-DGGML_AMX_TILE=OFF" in baseline and "-DGGML_AVX512=OFF" in baseline
    assert "-DGGML_AMX_TILE=OFF" in _llama("llama_cmake_args")  # never AMX, whatever the CPU advertises


@pytest.mark.slow
def test_a_foreign_llama_cpp_python_in_the_venv_is_replaced_by_the_portable_wheel(tmp_path):
    """A venv whose llama-cpp-python 0.3.36 came from elsewhere (pip's cache: a native build) gets ours."""
    portable_dir = Path(_llama("llama_wheel_dir"))
    wheel = next(portable_dir.glob("llama_cpp_python-0.3.36-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    site = next((venv / "lib").glob("python3*/site-packages"))
    # The project's venv lends its other packages, so nothing else is installed from the index.
    (site / "_project.pth").write_text(str(next((VENV / "lib").glob("python3*/site-packages"))) + "\n")
    foreign = tmp_path / "llama_cpp_python-0.3.36-py3-none-any.whl"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("llama_cpp/__init__.py", "BUILT_FOR = 'the build host'\n__version__ = '0.3.36'\n")
        info = "llama_cpp_python-0.3.36.dist-info"
        archive.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: llama_cpp_python\nVersion: 0.3.36\n")
        wheel_info = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        archive.writestr(f"{info}/WHEEL", wheel_info)
        archive.writestr(f"{info}/RECORD", "")
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(foreign)]
    subprocess.run(pip, check=True, timeout=300)
    wheels = tmp_path / "wheels"
    shutil.copytree(portable_dir, wheels / portable_dir.name)
    _llama(f"llama_install {venv}", RAG_WHEEL_DIR=str(wheels), PIP_NO_INDEX="1")
    check = "import llama_cpp; print(getattr(llama_cpp, 'BUILT_FOR', 'portable')); print(llama_cpp.__file__)"
    out = subprocess.run([str(venv / "bin" / "python"), "-c", check], capture_output=True, text=True, check=True)
    built_for, location = out.stdout.split()
    assert built_for == "portable" and location.startswith(str(site))
    assert (venv / ".llama-build-key").read_text().strip() == _llama("llama_build_key")
    assert wheel.exists()  # taken from the keyed directory, never rebuilt or fetched
