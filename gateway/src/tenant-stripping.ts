/**
 * Callers never name a tenant: the key does. Whatever a caller sends that
 * could be read as one is removed before forwarding: `agency_id` /
 * `sub_account_id` (in any case) in the query string and in the top-level
 * fields of a JSON body (here), and `x-tenant-*` headers (forward-headers.ts).
 */

const TENANT_FIELDS = ['agency_id', 'sub_account_id']

/** `agency_id`, `Agency_ID`, and the `agency_id[]` / `agency_id[x]` forms some query parsers fold into it. */
export function isTenantField(name: string): boolean {
  const bracket = name.indexOf('[')
  const base = (bracket === -1 ? name : name.slice(0, bracket)).toLowerCase()
  return base === TENANT_FIELDS[0] || base === TENANT_FIELDS[1]
}

function decodeQueryName(name: string): string {
  if (!name.includes('%') && !name.includes('+')) return name
  try {
    return decodeURIComponent(name.replaceAll('+', ' '))
  } catch {
    // Query parsers keep a name they cannot decode as it is; so do we.
    return name
  }
}

/**
 * Removes tenant parameters from a raw query (no leading `?`), comparing
 * decoded names as a query parser would; every other parameter is kept byte
 * for byte, in order.
 */
export function stripTenantQuery(query: string): string {
  if (query === '') return query
  const lower = query.toLowerCase()
  if (!query.includes('%') && !lower.includes('agency_id') && !lower.includes('sub_account_id')) return query
  const kept: string[] = []
  let removed = false
  for (const parameter of query.split('&')) {
    const equals = parameter.indexOf('=')
    const name = equals === -1 ? parameter : parameter.slice(0, equals)
    if (isTenantField(decodeQueryName(name))) removed = true
    else kept.push(parameter)
  }
  return removed ? kept.join('&') : query
}

/** Removes tenant fields from the top level of a parsed JSON body, in place. */
export function stripTenantFields(body: unknown): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return
  const fields = body as Record<string, unknown>
  for (const name of Object.keys(fields)) {
    if (isTenantField(name)) delete fields[name]
  }
}
