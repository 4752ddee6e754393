/**
 * Verifying an agency's audit trail (`ctl audit verify --agency A`). Each
 * event carries its place in its agency's chain (chain_seq), the hash of the
 * event before it (prev_hash) and its own hash: sha256 over a canonical
 * encoding of its fields and prev_hash (migration 015, audit_event_digest).
 * This recomputes every hash here, from the fields as the database prints
 * them, so a function replaced in the database does not vouch for itself,
 * and reports the first event that does not verify: one changed (its hash),
 * one removed (the next event's prev_hash or place), one inserted (its
 * prev_hash or its place). An attacker who rewrites every later event too
 * is caught only against a head recorded elsewhere: docs/operations.md.
 */
import { createHash } from 'node:crypto'
import type { Pool } from '@scoped/shared/db'
import { ApiError } from '@scoped/shared/errors'

/** The fields in the order of the encoding, each as the database prints it (audit_event_digest's list). */
const FIELDS = [
  'id::text',
  'agency_id::text',
  'chain_seq::text',
  'type',
  `to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`,
  'actor_kind',
  'actor_id',
  'sub_account_id::text',
  'key_id::text',
  'key_name',
  'scope',
  'client_address::text',
  'user_id::text',
  'user_email',
  'role',
  'refusals::text',
  'changes::text',
  'database_login',
  'prev_hash',
] as const

/**
 * Fields added after 015 (migration 023), each encoded as `<name>=<text>` and
 * appended only when set, so the hash of an event without them is unchanged.
 */
const OPTIONAL_FIELDS = ['key_hint', 'changed_fields::text', 'leak_source', 'leak_url'] as const

function optionalField(field: (typeof OPTIONAL_FIELDS)[number]): string {
  return `'${field.replace('::text', '')}=' || ${field}`
}

interface ChainRow {
  fields: (string | null)[]
  id: string
  chain_seq: string
  prev_hash: string
  hash: string
}

/** The canonical encoding: each field as `<bytes>:<text>`, or `~` for none, joined by `|`. */
export function canonicalEncoding(fields: ReadonlyArray<string | null>): string {
  return fields.map((field) => (field === null ? '~' : `${Buffer.byteLength(field, 'utf8')}:${field}`)).join('|')
}

export function eventHash(fields: ReadonlyArray<string | null>): string {
  return createHash('sha256').update(canonicalEncoding(fields), 'utf8').digest('hex')
}

/** Why `row`, expected at place `place` after an event hashed `previous`, does not verify; undefined when it does. */
function breakOf(row: ChainRow, place: number, previous: string): string | undefined {
  if (row.chain_seq !== String(place))
    return `it is at place ${row.chain_seq} of the chain where ${place} was expected (an event before it was removed or inserted)`
  if (row.prev_hash !== previous) return 'it does not follow the event before it (an event before it was removed, changed or inserted)'
  if (row.hash !== eventHash(row.fields)) return 'its content does not match its hash (it was changed)'
  return undefined
}

export interface VerifiedChain {
  agencyId: string
  events: number
  ok: true
}

/** Walks the agency's chain; throws naming the first event that does not verify. */
export async function verifyAuditChain(pool: Pool, agencyId: string): Promise<VerifiedChain> {
  const agency = await pool.query(`SELECT 1 FROM agencies WHERE id = $1`, [agencyId])
  if (agency.rowCount === 0) throw new ApiError('agencyNotFound')
  const { rows } = await pool.query<ChainRow>(
    `SELECT ARRAY[${FIELDS.join(', ')}] || array_remove(ARRAY[${OPTIONAL_FIELDS.map(optionalField).join(', ')}], NULL) AS fields, id, chain_seq::text AS chain_seq, prev_hash, hash
       FROM audit_events e WHERE agency_id = $1 ORDER BY e.chain_seq`,
    [agencyId],
  )
  let previous = ''
  for (const [index, row] of rows.entries()) {
    const reason = breakOf(row, index + 1, previous)
    if (reason !== undefined) {
      throw new ApiError('conflict', `The audit trail of agency ${agencyId} does not verify from event ${row.id} (number ${index + 1}): ${reason}`)
    }
    previous = row.hash
  }
  return { agencyId, events: rows.length, ok: true }
}
