/**
 * What the fault tests share: tenants and keys made as the operator would,
 * `ctl` as a process with its duration, requests through one replica, and
 * the replica registry as revokers see it.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { performance } from 'node:perf_hooks'
import type { Pool } from '@scoped/shared/db'
import { errorCatalog } from '@scoped/shared/errors'
import { KeyRevocationNotifier } from '@scoped/shared/key-invalidation'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import { TenantStore } from '@scoped/agency-service/tenants'
import type { HttpsClient, HttpsResponse } from '../helpers/https.js'
import type { CliResult, ProcessEnv } from '../helpers/processes.js'
import { runCtl } from '../helpers/processes.js'

export const REVOKED = errorCatalog.revokedKey.message
export const INVALID = errorCatalog.missingKey.message
/**
 * The longest a revoke or delete may take once ctl has started on it, whatever is broken: every step of
 * the invalidation has a deadline (DEADLINE_MS). Measured from ctl's first connection to its database
 * until it exited, so that the start of a Node process with tsx (seconds on a busy 2-core machine) does
 * not count; the whole time is reported too.
 */
export const COMMAND_LIMIT_MS = 10_000

export interface TimedCliResult extends CliResult {
  /** From spawn to exit. */
  ms: number
  /** From its pool's first connection (the command itself) to exit; `ms` when that was not seen. */
  workMs: number
}

/** `ctl …` as a process, and how long it took: in all, and once connected to `db` (when given). */
export async function timedCtl(args: string[], env: ProcessEnv, db?: { pool: Pool; name: string }): Promise<TimedCliResult> {
  const started = performance.now()
  let exited = false
  let connectedAt: number | undefined
  const watching = (async () => {
    while (db !== undefined && !exited && connectedAt === undefined) {
      const { rowCount } = await db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND application_name = 'scoped-api-ctl'`, [db.name])
      if ((rowCount ?? 0) > 0) connectedAt = performance.now()
      else await sleep(20)
    }
  })()
  const result = await runCtl(args, env)
  const done = performance.now()
  exited = true
  await watching
  return { ...result, ms: Math.round(done - started), workMs: Math.round(done - (connectedAt ?? started)) }
}

export interface Tenancy {
  agency: { id: string; name: string }
  sub: { id: string; name: string }
  /** Keys are made in process; a creation confirms through Postgres alone that every live replica knows the key. */
  keys: KeyService
  subKey(name?: string): Promise<CreatedKey>
  agencyKey(name?: string): Promise<CreatedKey>
}

/** One agency with one sub-account. */
export async function createTenancy(pool: Pool, name: string): Promise<Tenancy> {
  const tenants = new TenantStore(pool)
  const agency = await tenants.createAgency(name)
  const sub = await tenants.createSubAccount(agency.id, `${name} West`)
  const keys = new KeyService(pool, new KeyRevocationNotifier(pool, null))
  return {
    agency,
    sub,
    keys,
    subKey: (keyName = 'fault test') => keys.create({ scope: 'SUB-ACCOUNT', subAccountId: sub.id }, keyName, 'test'),
    agencyKey: (keyName = 'fault test') => keys.create({ scope: 'AGENCY', agencyId: agency.id }, keyName, 'test'),
  }
}

export function bearer(key: string): Record<string, string> {
  return { authorization: `Bearer ${key}` }
}

export function get(client: HttpsClient, path: string, key: string): Promise<HttpsResponse> {
  return client.request(path, { headers: bearer(key) })
}

/** Sends a signal to a process the test started (nothing when it has exited already). */
export function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error
  }
}

export { sleep }

/** The replica registry: id, when each was last seen (ms since the epoch, Postgres clock). */
export async function registry(pool: Pool): Promise<{ id: string; seenAt: number }[]> {
  const { rows } = await pool.query<{ replica_id: string; seen_at: Date }>(`SELECT replica_id, seen_at FROM gateway_replicas ORDER BY replica_id`)
  return rows.map((row) => ({ id: row.replica_id, seenAt: row.seen_at.getTime() }))
}

/** The registry id of a gateway process: `<host>-<pid>-<random>`. */
export async function replicaIdOf(pool: Pool, pid: number): Promise<string> {
  const entry = (await registry(pool)).find((row) => row.id.includes(`-${pid}-`))
  if (entry === undefined) throw new Error(`gateway process ${pid} is not in the replica registry`)
  return entry.id
}

/** Resolves once a `ctl` process has opened its pool on `database` (its revoke or delete follows within milliseconds). */
export async function ctlConnected(pool: Pool, database: string, timeoutMs = 60_000): Promise<void> {
  const until = performance.now() + timeoutMs
  while (performance.now() < until) {
    const { rowCount } = await pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND application_name = 'scoped-api-ctl'`, [database])
    if ((rowCount ?? 0) > 0) return
    await sleep(5)
  }
  throw new Error(`no ctl connected to ${database} within ${timeoutMs} ms`)
}

/** Whether replica `replicaId` has applied (from the invalidation log) the transaction that ended the key with `hash`. */
export async function appliedBy(pool: Pool, replicaId: string, hash: string): Promise<boolean> {
  const { rows } = await pool.query<{ applied: boolean }>(
    `SELECT bool_or(pg_visible_in_snapshot(k.xid, r.applied_snapshot)) AS applied
       FROM key_invalidations k, gateway_replicas r
      WHERE k.key_hash = $1 AND r.replica_id = $2`,
    [hash, replicaId],
  )
  return rows[0]?.applied === true
}
