/* seqjudge workbench: the keyboard. No library, no network, nothing inserted as HTML.
   On the queue: j / k move between the items, Enter opens the one marked.
   On an item:
   j / k        next / previous item
   arrows, tab  move between the rules of the decision form
   p / f        the focused rule passes / fails (then the next rule without a verdict is focused)
   n            focus the note (Escape leaves it)
   Enter        submit (ctrl-Enter or cmd-Enter from inside the note) */
(function () {
  "use strict";
  var form = document.getElementById("decision");
  function go(id) {
    var link = document.getElementById(id);
    if (link && link.href) window.location.assign(link.href);
  }
  function typing(target) {
    var tag = target && target.tagName;
    return tag === "TEXTAREA" || (tag === "INPUT" && target.type !== "radio") || tag === "SELECT";
  }
  var rows = form ? Array.prototype.slice.call(form.querySelectorAll(".rule-row")) : [];
  var current = -1;
  function focusRule(i) {
    if (!rows.length) return;
    current = Math.max(0, Math.min(rows.length - 1, i));
    rows.forEach(function (row, k) { row.classList.toggle("focused", k === current); });
    rows[current].focus();
    document.body.setAttribute("data-focused-rule", rows[current].getAttribute("data-rule"));
  }
  function setVerdict(value) {
    if (current < 0) focusRule(0);
    var input = rows[current].querySelector('input[value="' + value + '"]');
    if (!input) return;
    input.checked = true;
    rows[current].setAttribute("data-set", value);
    // On to the next rule still without a verdict (the preset ones are skipped); the last stays focused.
    for (var k = current + 1; k < rows.length; k++) {
      if (!rows[k].querySelector("input:checked")) { focusRule(k); return; }
    }
    if (current + 1 < rows.length) focusRule(current + 1);
  }
  rows.forEach(function (row, i) {
    row.addEventListener("focus", function () { if (current !== i) focusRule(i); });
    row.addEventListener("change", function () {
      var checked = row.querySelector("input:checked");
      if (checked) row.setAttribute("data-set", checked.value);
    });
  });
  function submit() {
    // Through the prototype: a control named "submit" would shadow form.submit.
    if (form && form.reportValidity()) HTMLFormElement.prototype.submit.call(form);
  }
  var queue = Array.prototype.slice.call(document.querySelectorAll("#queue-table tbody tr"));
  var marked = -1;
  function mark(i) {
    if (!queue.length) return;
    marked = Math.max(0, Math.min(queue.length - 1, i));
    queue.forEach(function (row, k) { row.classList.toggle("marked", k === marked); });
    queue[marked].scrollIntoView({block: "nearest"});
    document.body.setAttribute("data-marked-item", queue[marked].getAttribute("data-item"));
  }
  document.addEventListener("keydown", function (event) {
    if (!form && queue.length && !typing(event.target) && !event.ctrlKey && !event.metaKey && !event.altKey) {
      if (event.key === "j") { mark(marked + 1); return; }
      if (event.key === "k") { mark(marked - 1); return; }
      if (event.key === "Enter" && marked >= 0 && event.target.tagName !== "A") {
        event.preventDefault();
        queue[marked].querySelector("a").click();
        return;
      }
    }
    var note = form ? form.querySelector("textarea[name=note]") : null;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && form) {
      event.preventDefault();
      submit();
      return;
    }
    if (typing(event.target)) {
      if (event.key === "Escape" && note) { note.blur(); focusRule(current < 0 ? 0 : current); }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    switch (event.key) {
      case "j": go("next-item"); break;
      case "k": go("prev-item"); break;
      case "p": if (rows.length) { event.preventDefault(); setVerdict("pass"); } break;
      case "f": if (rows.length) { event.preventDefault(); setVerdict("fail"); } break;
      case "n": if (note) { event.preventDefault(); note.focus(); } break;
      case "ArrowDown": case "ArrowRight":
        if (rows.length) { event.preventDefault(); focusRule(current + 1); } break;
      case "ArrowUp": case "ArrowLeft":
        if (rows.length) { event.preventDefault(); focusRule(current - 1); } break;
      case "Tab":
        if (rows.length && current >= 0 && event.target === rows[current]) {
          var next = current + (event.shiftKey ? -1 : 1);
          if (next >= 0 && next < rows.length) { event.preventDefault(); focusRule(next); }
        }
        break;
      case "Enter":
        if (form && event.target.tagName !== "A" && event.target.tagName !== "BUTTON" &&
            event.target.tagName !== "SUMMARY") { event.preventDefault(); submit(); }
        break;
    }
  });
  if (rows.length) {
    var firstUnset = rows.findIndex(function (row) { return !row.querySelector("input:checked"); });
    focusRule(firstUnset < 0 ? 0 : firstUnset);
  }
  document.body.setAttribute("data-keys", "ready");  // the keys work from now on
})();
