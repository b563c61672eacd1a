# Sourced by _venv.sh: Tesseract with English and Spanish data, for scanned PDF pages (knowledge/ingest/ocr.py).
# Debian's packages; installed when missing and this runs as root, otherwise a one-line hint (OCR is then
# unavailable and a scanned page is recorded as needing it; everything else works).
ocr_install() {
  local missing=""
  command -v tesseract >/dev/null 2>&1 || missing="tesseract-ocr tesseract-ocr-eng tesseract-ocr-spa"
  if [ -z "$missing" ]; then
    local have
    have="$(tesseract --list-langs 2>/dev/null)"
    grep -qx eng <<<"$have" || missing="$missing tesseract-ocr-eng"
    grep -qx spa <<<"$have" || missing="$missing tesseract-ocr-spa"
  fi
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  else
    echo "OCR of scanned PDFs needs: sudo apt-get install $missing" >&2
  fi
}
