/** Spec §2: a key has exactly one of these scopes, fixed at creation. */
export const scopes = ['AGENCY', 'SUB-ACCOUNT'] as const
export type Scope = (typeof scopes)[number]

export function isScope(value: unknown): value is Scope {
  return value === 'AGENCY' || value === 'SUB-ACCOUNT'
}
