/**
 * The Postgres side of the key-state protocol (key-state.ts has the Redis
 * side). Everything here works on key hashes; the plaintext never gets this far.
 *
 * - lookupKeyByHash: a key's state, the source of truth; keySchemaMissing:
 *   whether the database has what that lookup reads (a gateway's start).
 * - recordLastUse: a batched write of last-use times and client addresses.
 * - the invalidation log (table key_invalidations, written by trigger in the
 *   revoking transaction) and the replica registry (gateway_replicas): each
 *   gateway replica polls the log with the snapshot it last applied, in one
 *   statement that also reports that snapshot; a revoker confirms that every
 *   replica seen recently has applied its transaction.
 */
import type { Pool, PoolClient } from './db.js'
import { pgErrorCode, pgErrorCodes } from './db.js'
import { canonicalCidrs, normalizeAddress } from './ip-address.js'
import type { ActiveKeyState, KeyInvalidation, KeyState } from './key-state.js'
import { isScope } from './scope.js'

interface LookupRow {
  id: string | null
  scope: string | null
  agency_id: string | null
  sub_account_id: string | null
  revoked: boolean
  deleted: boolean
  /** expires_at in epoch milliseconds, rounded down (the key is refused from that millisecond on). */
  expires_ms: number | null
  allowed_cidrs: string[] | null
  rate_limit_rate: number | null
  rate_limit_burst: number | null
  state_version: number | null
  permissions: string[] | null
}

const LOOKUP_SQL = `
  SELECT id, scope, agency_id, sub_account_id, revoked_at IS NOT NULL AS revoked, false AS deleted,
         floor(extract(epoch FROM expires_at) * 1000)::float8 AS expires_ms, allowed_cidrs::text[] AS allowed_cidrs,
         rate_limit_rate, rate_limit_burst, state_version::float8 AS state_version, permissions
    FROM api_keys WHERE key_hash = $1
  UNION ALL
  SELECT NULL, NULL, NULL, NULL, false, true, NULL, NULL, NULL, NULL, NULL, NULL FROM deleted_api_keys WHERE key_hash = $1
  LIMIT 1`

/**
 * The lookup is a named (prepared) statement: Postgres parses and plans it
 * once per connection instead of on every lookup, which measured as about
 * half of what a lookup of an indexed row costs. Behind PgBouncer in
 * transaction mode this needs its `max_prepared_statements` (README).
 */
const LOOKUP_STATEMENT = 'lookup-key-by-hash'

/**
 * Pools whose database answered that the named lookup already exists: one
 * session shared by every connection (the embedded Postgres of `npm start`),
 * where whichever connection prepared it first holds the name for all. Their
 * lookups are unprepared from then on.
 */
const sharedSessionPools = new WeakSet<Pool>()

function queryLookup(pool: Pool, hash: string): Promise<{ rows: LookupRow[] }> {
  if (sharedSessionPools.has(pool)) return pool.query<LookupRow>(LOOKUP_SQL, [hash])
  return pool.query<LookupRow>({ name: LOOKUP_STATEMENT, text: LOOKUP_SQL, values: [hash] }).catch((error: unknown) => {
    const code = pgErrorCode(error)
    if (code === pgErrorCodes.duplicatePreparedStatement) sharedSessionPools.add(pool)
    // A migration changed what the prepared lookup returns: this lookup is made unprepared. The pool drops a
    // connection whose query failed, so its successor prepares the statement afresh: one failed round trip
    // per pooled connection, once per such migration.
    if (code === pgErrorCodes.duplicatePreparedStatement || code === pgErrorCodes.cachedPlanChanged) return pool.query<LookupRow>(LOOKUP_SQL, [hash])
    throw error
  })
}

export async function lookupKeyByHash(pool: Pool, hash: string): Promise<KeyState> {
  const { rows } = await queryLookup(pool, hash)
  const row = rows[0]
  if (row === undefined) return { status: 'unknown' }
  if (row.deleted) return { status: 'deleted' }
  if (row.id === null || row.agency_id === null || !isScope(row.scope)) throw new Error('api_keys row is incomplete')
  const tenant = { scope: row.scope, agencyId: row.agency_id, subAccountId: row.sub_account_id, keyId: row.id }
  // A revoked key still exists for its tenant: its refusals are counted in its usage.
  if (row.revoked) return { status: 'revoked', tenant }
  const state: ActiveKeyState = { status: 'active', tenant }
  // Only the limits a key has: a key without them reads exactly as before they existed.
  if (row.expires_ms !== null) state.expiresAt = row.expires_ms
  if (row.allowed_cidrs !== null && row.allowed_cidrs.length > 0) state.allowedCidrs = canonicalCidrs(row.allowed_cidrs)
  if (row.rate_limit_rate !== null && row.rate_limit_burst !== null) state.rateLimit = { rate: row.rate_limit_rate, burst: row.rate_limit_burst }
  if (row.state_version !== null) state.version = row.state_version
  // Stored sorted and each once (migration 016); absent: unrestricted, as every key was before.
  if (row.permissions !== null) state.permissions = row.permissions
  return state
}

/** SQLSTATEs of a statement that names a column or table the database does not have (yet). */
const SCHEMA_BEHIND = new Set<string>([pgErrorCodes.undefinedColumn, pgErrorCodes.undefinedTable])

/**
 * Whether the database has every column the lookup reads: undefined when it
 * does, or what is missing (Postgres' own words) when a migration is still to
 * be applied. The gateway's role cannot read schema_migrations, so the check
 * is the lookup statement itself, for a hash no key has. Any other failure
 * (Postgres unreachable, say) is thrown.
 */
export async function keySchemaMissing(pool: Pool): Promise<string | undefined> {
  try {
    await pool.query(LOOKUP_SQL, ['0'.repeat(64)])
    return undefined
  } catch (error) {
    const code = pgErrorCode(error)
    if (code !== undefined && SCHEMA_BEHIND.has(code)) return error instanceof Error ? error.message : code
    throw error
  }
}

/** One key's latest use: when, and from which client address (the gateway's, normalized), if known. */
export interface LastUse {
  at: Date
  ip: string | null
}

/**
 * Writes many last uses in one statement. GREATEST keeps the newest time
 * when several gateway replicas flush out of order, and the address goes
 * with the time it came with; revoked keys are written too (the last use is
 * kept after revocation). A plain Date is a use from an unknown address.
 */
export async function recordLastUse(pool: Pool, uses: ReadonlyMap<string, Date | LastUse>): Promise<void> {
  if (uses.size === 0) return
  const ids = [...uses.keys()]
  const entries = ids.map((id) => {
    const use = uses.get(id)!
    return use instanceof Date ? { at: use, ip: null } : use
  })
  const times = entries.map((use) => use.at.toISOString())
  const addresses = entries.map((use) => (use.ip === null ? null : (normalizeAddress(use.ip) ?? null)))
  await pool.query(
    `UPDATE api_keys AS k
        SET last_used_at = GREATEST(COALESCE(k.last_used_at, '-infinity'::timestamptz), u.used_at),
            last_used_ip = CASE WHEN u.used_at >= COALESCE(k.last_used_at, '-infinity'::timestamptz) AND u.ip IS NOT NULL
                                THEN u.ip ELSE k.last_used_ip END
       FROM unnest($1::uuid[], $2::timestamptz[], $3::inet[]) AS u(id, used_at, ip)
      WHERE k.id = u.id`,
    [ids, times, addresses],
  )
}

/** The id of the current transaction, for confirmInvalidation once it has committed. */
export async function currentTransactionId(client: PoolClient): Promise<string> {
  const { rows } = await client.query<{ xid: string }>(`SELECT pg_current_xact_id()::text AS xid`)
  return rows[0]!.xid
}

export interface LogPoll {
  /** The snapshot this poll read up to; pass it to the next poll once its changes are applied. */
  snapshot: string
  changes: KeyInvalidation[]
  /** Gateway replicas seen within the live window (this one included once registered). */
  live: number
}

type ChangeRow = [
  hash: string,
  state: KeyInvalidation['state'],
  version: number | null,
  scope: string | null,
  agencyId: string | null,
  subAccountId: string | null,
  keyId: string | null,
]

/**
 * A 'changed' row carries the state version the change made (migration 009); a revoke or delete none.
 * A revoke carries the key's owner, read from api_keys beside it (CHANGES_SELECT), so its later requests
 * are counted without a lookup on the request path.
 */
function toChanges(rows: ChangeRow[] | null): KeyInvalidation[] {
  return (rows ?? []).map(([hash, state, version, scope, agencyId, subAccountId, keyId]) => {
    const change: KeyInvalidation = version === null ? { hash, state } : { hash, state, version }
    if (state === 'revoked' && keyId !== null && agencyId !== null && isScope(scope)) change.tenant = { scope, agencyId, subAccountId, keyId }
    return change
  })
}

/** The log's rows matching `where`, in order, as one JSON array (a revoked key's owner beside it: toChanges). */
function changesSelect(where: string): string {
  return `SELECT json_agg(json_build_array(i.key_hash, i.state, i.state_version, k.scope, k.agency_id, k.sub_account_id, k.id) ORDER BY i.id)
            FROM key_invalidations AS i LEFT JOIN api_keys AS k ON i.state = 'revoked' AND k.key_hash = i.key_hash
           WHERE ${where}`
}

/**
 * A replica's start: the snapshot to follow from, and the keys ended in the
 * last `recentSeconds` (so a replica started after a revoke still knows to
 * distrust a Redis entry written before it).
 */
export async function readRecentInvalidations(pool: Pool, recentSeconds: number): Promise<LogPoll> {
  const { rows } = await pool.query<{ snapshot: string; changes: ChangeRow[] | null }>(
    `SELECT pg_current_snapshot()::text AS snapshot,
            (${changesSelect(`i.recorded_at > now() - $1 * interval '1 second'`)}) AS changes`,
    [recentSeconds],
  )
  const row = rows[0]!
  return { snapshot: row.snapshot, changes: toChanges(row.changes), live: 1 }
}

/**
 * One poll of the log, in one statement: records that `replicaId` has
 * applied everything visible in `applied`, and reads what was committed
 * since. Changes are exactly the rows visible now and not in `applied`.
 */
export async function pollInvalidations(pool: Pool, replicaId: string, applied: string, liveMs: number): Promise<LogPoll> {
  // The heartbeat is a function of the owner's (migration 013): Postgres stamps seen_at, never the caller.
  const { rows } = await pool.query<{ snapshot: string; changes: ChangeRow[] | null; live: number }>(
    `SELECT pg_current_snapshot()::text AS snapshot,
            (${changesSelect(`i.xid >= pg_snapshot_xmin($2::pg_snapshot) AND NOT pg_visible_in_snapshot(i.xid, $2::pg_snapshot)`)}) AS changes,
            beat.live
       FROM gateway_replica_heartbeat($1, $2::pg_snapshot, $3) AS beat(live)`,
    [replicaId, applied, liveMs],
  )
  const row = rows[0]!
  return { snapshot: row.snapshot, changes: toChanges(row.changes), live: Math.max(1, row.live) }
}

/** A replica that stops cleanly leaves the registry, so no revoker waits for it. */
export async function leaveRegistry(pool: Pool, replicaId: string): Promise<void> {
  await pool.query(`SELECT gateway_replica_leave($1)`, [replicaId])
}

/**
 * Replicas seen within `liveMs` that have not yet applied transaction `xid`.
 * A replica not seen for that long has stopped trusting its caches (it does
 * so `staleAfterMs` < liveMs after its last successful poll), so it is no
 * longer waited for. A row stamped ahead of the database's clock is not live
 * either: Postgres stamps every heartbeat (migration 013), so such a row is
 * no heartbeat, and waiting for it would hold every change to its deadline.
 * clock_timestamp(), read after this statement's snapshot, is past every
 * heartbeat the snapshot can see.
 */
export async function replicasBehind(pool: Pool, xid: string, liveMs: number): Promise<string[]> {
  const { rows } = await pool.query<{ replica_id: string }>(
    `SELECT replica_id FROM gateway_replicas
      WHERE seen_at > now() - $2 * interval '1 millisecond' AND seen_at <= clock_timestamp()
        AND NOT pg_visible_in_snapshot($1::xid8, applied_snapshot)`,
    [xid, liveMs],
  )
  return rows.map((row) => row.replica_id)
}
