/**
 * The frame every member page shares: one navigation bar whose entries the modules contribute
 * (`ServiceModule.navigation`), with the brand, the signed-in member and sign-out. The platform
 * names no entry: labels, paths, badges and who sees them come from the modules. Entries that
 * declare `section: 'settings'` are gathered under the bar's one Settings entry (`/settings`, an
 * index of them with their summaries) and a sub-menu on each of their pages, so the bar keeps the
 * work pages and stays on one line.
 */

/** Who is looking at a page: the signed-in member and the capabilities pages ask about. */
export interface Viewer {
  readonly id: string;
  readonly name: string;
  readonly role: string;
  readonly workspaceId: string;
  /** May manage the workspace's settings (server/capabilities.ts). */
  readonly manage: boolean;
}

/** One entry of the navigation bar, contributed by a module. */
export interface NavEntry {
  readonly label: string;
  /** The page it opens (a path of this service); the entry is current on this path and below it. */
  readonly path: string;
  /** Place in the bar, lower first (ties keep the modules' order). */
  readonly order?: number;
  /** The brand links here and `GET /` sends a signed-in member here (the first such entry). */
  readonly home?: boolean;
  /** Where `GET /` sends someone not signed in (a public page, e.g. the API reference; the first such entry). */
  readonly landing?: boolean;
  /** A count shown beside the label when above zero, e.g. unread notices; `badgeLabel` names it for screen readers. */
  badge?(viewer: Viewer): Promise<number>;
  readonly badgeLabel?: string;
  /** Whether this viewer sees the entry (everyone when absent). */
  visible?(viewer: Viewer): boolean;
  /**
   * `settings`: listed under the bar's one Settings entry (the `/settings` index and the settings
   * pages' own menu) instead of in the bar itself.
   */
  readonly section?: 'settings';
  /** One line saying what the page is for, shown on the `/settings` index. */
  readonly summary?: string;
}

/** What the frame template shows. */
export interface Frame {
  brand: string;
  /** The bar; `current` is `page` for the page's own entry, `true` for the Settings entry of a settings page. */
  entries: Array<{ label: string; href: string; current: 'page' | 'true' | false; badge: number; badgeLabel: string }>;
  /** The settings sub-menu, on pages of the settings section (not on the index, which lists them itself). */
  settings: Array<{ label: string; href: string; current: boolean }> | null;
  member: string;
  role: string;
  csrf: string;
}

/** Whether `path` is `base` or below it (`/settings/webhooks/wh_1` is below `/settings/webhooks`). */
const within = (path: string, base: string) => path === base || path.startsWith(base.endsWith('/') ? base : `${base}/`);

/** The bar's one entry for the settings section (`GET /settings`, the index of the settings pages). */
export const SETTINGS_PATH = '/settings';
const SETTINGS_ORDER = 80;

/** The navigation bar of one service process, filled by the modules at start. */
export class Navigation {
  private readonly entries: Array<NavEntry & { seq: number }> = [];

  add(entries: readonly NavEntry[]): void {
    for (const e of entries) {
      if (!/^\/[^/\\\s]/.test(e.path)) throw new Error(`navigation: ${e.path} must be a path of this service`);
      if (this.entries.some((x) => x.path === e.path)) throw new Error(`navigation: two entries open ${e.path}`);
      if (e.path === SETTINGS_PATH) throw new Error(`navigation: ${SETTINGS_PATH} is the settings index (declare section: 'settings' instead)`);
      this.entries.push({ ...e, seq: this.entries.length });
      this.entries.sort((a, b) => (a.order ?? 100) - (b.order ?? 100) || a.seq - b.seq);
    }
  }

  /** Where the brand links and `GET /` sends a member; null when no module offers a home. */
  get home(): string | null {
    return (this.entries.find((e) => e.home) ?? this.entries[0])?.path ?? null;
  }

  /** Where `GET /` sends someone not signed in; null when no module offers a public landing page. */
  get landing(): string | null {
    return this.entries.find((e) => e.landing)?.path ?? null;
  }

  /** The settings pages this viewer may see, in the bar's order (the `/settings` index lists them). */
  settings(viewer: Viewer): Array<{ label: string; path: string; summary: string }> {
    return this.entries.filter((e) => e.section === 'settings' && (!e.visible || e.visible(viewer))).map((e) => ({ label: e.label, path: e.path, summary: e.summary ?? '' }));
  }

  /**
   * The frame for one page: the viewer's bar entries with their badges (settings pages gathered
   * under one Settings entry), the current one marked, and the settings sub-menu on a settings page.
   */
  async frame(viewer: Viewer, currentPath: string, csrf: string): Promise<Frame> {
    const seen = this.entries.filter((e) => !e.visible || e.visible(viewer));
    // The longest matching path is current: an entry nested below another wins over it.
    const current = seen.filter((e) => within(currentPath, e.path)).sort((a, b) => b.path.length - a.path.length)[0];
    const inSettings = seen.filter((e) => e.section === 'settings');
    const bar = seen.filter((e) => e.section !== 'settings');
    const badges = await Promise.all(bar.map((e) => (e.badge ? e.badge(viewer) : Promise.resolve(0))));
    const entries: Frame['entries'] = bar.map((e, i) => ({ label: e.label, href: e.path, current: e === current ? 'page' : false, badge: badges[i]!, badgeLabel: e.badgeLabel ?? '' }));
    const settingsPage = current?.section === 'settings';
    if (inSettings.length) {
      const at = bar.findIndex((e) => (e.order ?? 100) > SETTINGS_ORDER);
      const marked: Frame['entries'][number]['current'] = currentPath === SETTINGS_PATH ? 'page' : settingsPage ? 'true' : false;
      const entry = { label: 'Settings', href: SETTINGS_PATH, current: marked, badge: 0, badgeLabel: '' };
      entries.splice(at === -1 ? entries.length : at, 0, entry);
    }
    return {
      brand: this.home ?? '/',
      entries,
      settings: settingsPage ? inSettings.map((e) => ({ label: e.label, href: e.path, current: e === current })) : null,
      member: viewer.name,
      role: viewer.role,
      csrf,
    };
  }
}
