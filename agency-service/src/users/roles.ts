/** A console user's role in an agency: owners and admins manage keys, members see them (and manage their sub-accounts'). */
export const roles = ['owner', 'admin', 'member'] as const
export type Role = (typeof roles)[number]

export function isRole(value: unknown): value is Role {
  return typeof value === 'string' && (roles as readonly string[]).includes(value)
}
