// The review queue's verdict keys: 1 to 5 (with or without Alt) press the verdict button of that key.
// The buttons carry accesskey too, but browsers differ in the modifier and some ignore it; this works
// the same everywhere. Keys typed into a field are left alone.
"use strict";
document.addEventListener("keydown", function (event) {
  if (event.ctrlKey || event.metaKey || event.isComposing || event.defaultPrevented) {
    return;
  }
  var target = event.target;
  if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) {
    return;
  }
  if (!/^[1-9]$/.test(event.key)) {
    return;
  }
  var button = document.querySelector('button[name="verdict"][accesskey="' + event.key + '"]');
  if (!button || button.disabled) {
    return;
  }
  event.preventDefault();
  button.click();
});
