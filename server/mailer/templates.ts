import { fileURLToPath } from 'node:url';
import { Eta } from 'eta';

/** A module's mail templates, rendered to the text and HTML pair a `MailMessage` carries. */
export interface MailTemplates {
  /**
   * Renders `<name>.text.eta` (plain text: `<%= %>` inserts values as they are) and `<name>.html.eta`
   * (auto-escaped like every page, inside the platform's mail layout, titled with `data.subject`).
   */
  render(name: string, data: Record<string, unknown>): { text: string; html: string };
}

const layout = new Eta({ views: fileURLToPath(new URL('.', import.meta.url)), autoEscape: true, autoTrim: false });

/** The mail templates of a module's folder (e.g. `new URL('./mails', import.meta.url)`). */
export function mailTemplates(dir: URL): MailTemplates {
  const views = fileURLToPath(dir);
  const html = new Eta({ views, autoEscape: true, autoTrim: false });
  const text = new Eta({ views, autoEscape: false, autoTrim: false });
  return {
    render(name, data) {
      const body = html.render(`${name}.html.eta`, data);
      return {
        text: text.render(`${name}.text.eta`, data),
        html: layout.render('layout', { subject: String(data.subject ?? ''), body }),
      };
    },
  };
}
