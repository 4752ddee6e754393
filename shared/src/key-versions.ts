/**
 * The state versions of changed keys (migration 009), for the invalidation
 * message: a replica that hears of a change through Redis pins the version
 * before it acknowledges, so a revoker confirmed by acknowledgements alone
 * never returns while a replica could still believe an older entry. Read
 * after the change committed: the version read is the change's or a later
 * one, and either refuses every state from before the change.
 */
import type { Pool } from './db.js'
import type { KeyInvalidation } from './key-state.js'

/** `keys` with each `changed` key's current version; the others as they are. Rejects when Postgres does. */
export async function withStateVersions(pool: Pool, keys: readonly KeyInvalidation[]): Promise<KeyInvalidation[]> {
  const changed = keys.filter((key) => key.state === 'changed' && key.version === undefined).map((key) => key.hash)
  if (changed.length === 0) return [...keys]
  const { rows } = await pool.query<{ key_hash: string; version: number }>(
    `SELECT key_hash, state_version::float8 AS version FROM api_keys WHERE key_hash = ANY($1::text[])`,
    [changed],
  )
  const versions = new Map(rows.map((row) => [row.key_hash, row.version]))
  return keys.map((key) => {
    const version = key.state === 'changed' ? versions.get(key.hash) : undefined
    return version === undefined || key.version !== undefined ? key : { ...key, version }
  })
}
