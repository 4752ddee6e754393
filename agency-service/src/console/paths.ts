/**
 * The console's paths. Routes are declared relative to the prefix the
 * console is registered under (`consoleRoutes`); every absolute path that a
 * page links to, a form posts to, a redirect names or a cookie is scoped to
 * is built here from that prefix (`consolePaths`), so nothing else spells
 * out where the console lives and it works under any prefix.
 */

/** Route patterns, relative to the console's prefix. */
export const consoleRoutes = {
  home: '/',
  signIn: '/sign-in',
  signOut: '/sign-out',
  assets: '/assets/',
  agencyKeys: '/agencies/:tenantId/keys',
  subAccountKeys: '/sub-accounts/:tenantId/keys',
  agencyAudit: '/agencies/:tenantId/audit',
  subAccountAudit: '/sub-accounts/:tenantId/audit',
  agencyUsage: '/agencies/:tenantId/usage',
  subAccountUsage: '/sub-accounts/:tenantId/usage',
  agencyMembers: '/agencies/:tenantId/members',
  agencyWebhooks: '/agencies/:tenantId/webhooks',
  agencyInvite: '/agencies/:tenantId/invitations/new',
  agencyInvitationCreated: '/agencies/:tenantId/invitations/:invitationId/created',
  invitation: '/invitations/:token',
  accountPassword: '/account/password',
} as const

export interface ConsolePaths {
  /** The home page (the prefix itself), and the path every console cookie is scoped to. */
  readonly home: string
  readonly signIn: string
  readonly signOut: string
  /** A file of the console's stylesheet and script folder, e.g. `console.css`. */
  asset(name: string): string
  /** An agency's key pages. */
  agencyKeys(agencyId: string): string
  /** A sub-account's key pages. */
  subAccountKeys(subAccountId: string): string
  /** An agency's audit trail (its own events and its sub-accounts'). */
  agencyAudit(agencyId: string): string
  /** A sub-account's audit trail. */
  subAccountAudit(subAccountId: string): string
  /** An agency's usage (its own keys and its sub-accounts'). */
  agencyUsage(agencyId: string): string
  /** A sub-account's usage. */
  subAccountUsage(subAccountId: string): string
  /** An agency's members page (its owners'). */
  agencyMembers(agencyId: string): string
  /** An agency's webhook endpoints (its owners' and admins'). */
  agencyWebhooks(agencyId: string): string
  /** An agency's page for inviting a member (its owners' and admins'). */
  agencyInvite(agencyId: string): string
  /** The page that shows a new invitation's link, once. */
  agencyInvitationCreated(agencyId: string, invitationId: string): string
  /** The page an invitation link opens (no session needed). */
  invitation(token: string): string
  /** The signed-in user's own password. */
  readonly accountPassword: string
}

/** The absolute paths of a console registered under `prefix` (e.g. `/console`; '' at the root). */
export function consolePaths(prefix: string): ConsolePaths {
  const base = prefix.replace(/\/+$/, '')
  const under = (route: string): string => `${base}${route}`
  return {
    home: base === '' ? '/' : base,
    signIn: under(consoleRoutes.signIn),
    signOut: under(consoleRoutes.signOut),
    asset: (name) => under(`${consoleRoutes.assets}${name}`),
    agencyKeys: (agencyId) => under(consoleRoutes.agencyKeys.replace(':tenantId', () => agencyId)),
    subAccountKeys: (subAccountId) => under(consoleRoutes.subAccountKeys.replace(':tenantId', () => subAccountId)),
    agencyAudit: (agencyId) => under(consoleRoutes.agencyAudit.replace(':tenantId', () => agencyId)),
    subAccountAudit: (subAccountId) => under(consoleRoutes.subAccountAudit.replace(':tenantId', () => subAccountId)),
    agencyUsage: (agencyId) => under(consoleRoutes.agencyUsage.replace(':tenantId', () => agencyId)),
    subAccountUsage: (subAccountId) => under(consoleRoutes.subAccountUsage.replace(':tenantId', () => subAccountId)),
    agencyMembers: (agencyId) => under(consoleRoutes.agencyMembers.replace(':tenantId', () => agencyId)),
    agencyWebhooks: (agencyId) => under(consoleRoutes.agencyWebhooks.replace(':tenantId', () => agencyId)),
    agencyInvite: (agencyId) => under(consoleRoutes.agencyInvite.replace(':tenantId', () => agencyId)),
    agencyInvitationCreated: (agencyId, invitationId) =>
      under(consoleRoutes.agencyInvitationCreated.replace(':tenantId', () => agencyId).replace(':invitationId', () => invitationId)),
    invitation: (token) => under(consoleRoutes.invitation.replace(':token', () => encodeURIComponent(token))),
    accountPassword: under(consoleRoutes.accountPassword),
  }
}
