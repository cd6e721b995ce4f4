// A PNG with clickable regions: each region is a transparent button over its part of the image.
// A click sends {event: "click", key} to the kernel; the kernel decides what it selects.
// Drawn once: the kernel sends a new picture or selection as a new model, never as a change (clickable.py).
function render({ model, el }) {
  el.classList.add("zl-clickable");
  const frame = document.createElement("div");
  frame.className = "zl-clickable-frame";
  const image = document.createElement("img");
  image.alt = model.get("alt");
  const layer = document.createElement("div");
  layer.className = "zl-clickable-layer";
  frame.append(image, layer);
  el.append(frame);

  const value = model.get("value");
  const url = value && value.byteLength ? URL.createObjectURL(new Blob([value], { type: "image/png" })) : null;
  if (url) image.src = url;
  else frame.style.display = "none"; // nothing to show (an empty image would show a broken-image icon)

  const selected = model.get("selected");
  const buttons = model.get("regions").map(([key, label, left, top, width, height]) => {
    const button = document.createElement("button");
    button.type = "button";
    button.tabIndex = -1; // the controls beside the plot are the keyboard route
    button.className = key === selected ? "zl-region zl-selected" : "zl-region";
    button.dataset.key = key;
    button.title = label;
    button.setAttribute("aria-label", label);
    Object.assign(button.style, {
      left: `${left * 100}%`, top: `${top * 100}%`, width: `${width * 100}%`, height: `${height * 100}%`,
    });
    button.addEventListener("click", () => model.send({ event: "click", key }));
    return button;
  });
  layer.replaceChildren(...buttons);
  return () => {
    if (url) URL.revokeObjectURL(url);
  };
}

export default { render };
