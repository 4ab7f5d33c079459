/**
 * The frame every member page shares: one navigation bar whose entries the modules contribute
 * (`ServiceModule.navigation`), with the brand, the signed-in member and sign-out. The platform
 * names no entry: labels, paths, badges and who sees them come from the modules.
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
  entries: Array<{ label: string; href: string; current: boolean; badge: number; badgeLabel: string }>;
  member: string;
  role: string;
  csrf: string;
}

/** Whether `path` is `base` or below it (`/settings/webhooks/wh_1` is below `/settings/webhooks`). */
const within = (path: string, base: string) => path === base || path.startsWith(base.endsWith('/') ? base : `${base}/`);

/** The navigation bar of one service process, filled by the modules at start. */
export class Navigation {
  private readonly entries: Array<NavEntry & { seq: number }> = [];

  add(entries: readonly NavEntry[]): void {
    for (const e of entries) {
      if (!/^\/[^/\\\s]/.test(e.path)) throw new Error(`navigation: ${e.path} must be a path of this service`);
      if (this.entries.some((x) => x.path === e.path)) throw new Error(`navigation: two entries open ${e.path}`);
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

  /** The frame for one page: the viewer's entries with their badges, the current one marked. */
  async frame(viewer: Viewer, currentPath: string, csrf: string): Promise<Frame> {
    const seen = this.entries.filter((e) => !e.visible || e.visible(viewer));
    // The longest matching path is current: an entry nested below another wins over it.
    const current = seen.filter((e) => within(currentPath, e.path)).sort((a, b) => b.path.length - a.path.length)[0];
    const badges = await Promise.all(seen.map((e) => (e.badge ? e.badge(viewer) : Promise.resolve(0))));
    return {
      brand: this.home ?? '/',
      entries: seen.map((e, i) => ({ label: e.label, href: e.path, current: e === current, badge: badges[i]!, badgeLabel: e.badgeLabel ?? '' })),
      member: viewer.name,
      role: viewer.role,
      csrf,
    };
  }
}
