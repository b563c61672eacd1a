// Drag-and-drop onto the upload form: dropped files become the file input's selection.
(function () {
  const zone = document.getElementById("dropzone");
  const input = document.getElementById("files");
  const list = document.getElementById("chosen");
  if (!zone || !input) return;
  function show() {
    list.replaceChildren(...Array.from(input.files).map((file) => {
      const item = document.createElement("li");
      item.textContent = file.name + " (" + Math.ceil(file.size / 1024) + " KiB)";
      return item;
    }));
  }
  ["dragenter", "dragover"].forEach((name) => zone.addEventListener(name, (event) => { event.preventDefault(); zone.classList.add("over"); }));
  ["dragleave", "drop"].forEach((name) => zone.addEventListener(name, () => zone.classList.remove("over")));
  zone.addEventListener("drop", (event) => { event.preventDefault(); input.files = event.dataTransfer.files; show(); });
  input.addEventListener("change", show);
})();
