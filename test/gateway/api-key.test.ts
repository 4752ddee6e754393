import t from 'tap'
import { generateKey } from '@scoped/shared/keys'
import { extractApiKey } from '@scoped/gateway/api-key'
import type { KeyExtraction } from '@scoped/gateway/api-key'

const key = generateKey()
const other = generateKey()
const badChecksum = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A')
const ok: KeyExtraction = { ok: true, key }
const missing: KeyExtraction = { ok: false, reason: 'missing' }
const malformed: KeyExtraction = { ok: false, reason: 'malformed' }

// Rows: Node's raw header list (name, value, …) and the expected extraction.
const rows: Array<[string, string[], KeyExtraction]> = [
  ['no headers at all', [], missing],
  ['unrelated headers only', ['Host', 'x', 'Accept', '*/*'], missing],
  ['Authorization: Bearer <key>', ['Authorization', `Bearer ${key}`], ok],
  ['lower-case header name', ['authorization', `Bearer ${key}`], ok],
  ['upper-case header name', ['AUTHORIZATION', `Bearer ${key}`], ok],
  ['scheme in lower case', ['Authorization', `bearer ${key}`], ok],
  ['scheme in upper case', ['Authorization', `BEARER ${key}`], ok],
  ['scheme in mixed case', ['Authorization', `bEaReR ${key}`], ok],
  ['several spaces after the scheme', ['Authorization', `Bearer   ${key}`], ok],
  ['x-api-key: <key>', ['x-api-key', key], ok],
  ['X-API-Key in mixed case', ['X-API-Key', key], ok],
  ['x-api-key among other headers', ['Host', 'x', 'x-api-key', key, 'Accept', '*/*'], ok],
  ['both headers, same key', ['Authorization', `Bearer ${key}`, 'x-api-key', key], malformed],
  ['both headers, different keys', ['x-api-key', other, 'Authorization', `Bearer ${key}`], malformed],
  ['both headers, one empty', ['Authorization', '', 'x-api-key', key], malformed],
  ['Authorization repeated, same value', ['Authorization', `Bearer ${key}`, 'Authorization', `Bearer ${key}`], malformed],
  ['Authorization repeated, different case', ['Authorization', `Bearer ${key}`, 'authorization', `Bearer ${other}`], malformed],
  ['x-api-key repeated', ['x-api-key', key, 'x-api-key', key], malformed],
  ['x-api-key repeated, second empty', ['x-api-key', key, 'X-Api-Key', ''], malformed],
  ['empty Authorization', ['Authorization', ''], malformed],
  ['empty x-api-key', ['x-api-key', ''], malformed],
  ['Bearer with no credential', ['Authorization', 'Bearer'], malformed],
  ['Bearer and a space only', ['Authorization', 'Bearer '], malformed],
  ['Basic scheme', ['Authorization', `Basic ${Buffer.from(`${key}:`).toString('base64')}`], malformed],
  ['Token scheme', ['Authorization', `Token ${key}`], malformed],
  ['ApiKey scheme', ['Authorization', `ApiKey ${key}`], malformed],
  ['key without a scheme in Authorization', ['Authorization', key], malformed],
  ['Bearer scheme in x-api-key', ['x-api-key', `Bearer ${key}`], malformed],
  ['tab instead of a space', ['Authorization', `Bearer\t${key}`], malformed],
  ['two credentials after Bearer', ['Authorization', `Bearer ${key} ${other}`], malformed],
  ['comma-joined keys', ['x-api-key', `${key}, ${other}`], malformed],
  // The shape only: the gate checks the checksum of a key it does not hold in memory (gate.ts; gateway.test.ts).
  ['bad checksum (Authorization)', ['Authorization', `Bearer ${badChecksum}`], { ok: true, key: badChecksum }],
  ['bad checksum (x-api-key)', ['x-api-key', badChecksum], { ok: true, key: badChecksum }],
  ['base62 broken by one character', ['x-api-key', key.slice(0, 20) + '-' + key.slice(21)], malformed],
  ['truncated key', ['x-api-key', key.slice(0, -1)], malformed],
  ['wrong prefix', ['x-api-key', key.replace('sak_live_', 'sak_test_')], malformed],
  ['not a key at all', ['x-api-key', 'hunter2'], malformed],
]

for (const [name, rawHeaders, expected] of rows) {
  t.test(name, async (t) => {
    t.same(extractApiKey(rawHeaders), expected)
  })
}
