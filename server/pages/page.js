// The page kit's script (/assets/page.js), sent with every page that has a copy button: small behaviours any module's page may use.
// Copy buttons: a button with data-copy="<element id>" (rendered hidden, shown here) copies that
// element's text to the clipboard, or selects it when the clipboard cannot be written.
for (const button of document.querySelectorAll('button[data-copy]')) {
  button.hidden = false;
  button.addEventListener('click', async () => {
    const source = document.getElementById(button.dataset.copy);
    if (!source) return;
    const text = source.textContent.trim();
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = 'Copied';
    } catch {
      // No clipboard access: select the text so that Ctrl+C / Cmd+C copies it.
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      button.textContent = 'Selected: press Ctrl+C';
    }
  });
}
