/**
 * Leak response: keys reported as leaked (by GitHub's secret scanning, or by
 * anyone through the public revocation API) are looked up by their hash
 * only. Each ACTIVE key found gets a `key.leaked` audit event saying where it
 * was reported (the hooks branch's webhooks deliver it) and, unless
 * LEAKED_KEY_ACTION=notify, is revoked at once in the same transaction, as
 * `ctl key revoke` revokes (`key.revoked`, then every gateway replica told and
 * waited for: KeyContext.invalidate). A key found revoked or expired changes
 * nothing and records nothing.
 *
 * The public revocation API must not reveal whether a key exists, by its
 * answer or by its time: every report does the same work whatever it finds:
 * one transaction that locks the rows by hash and takes its transaction id,
 * then one confirmed invalidation round with one entry per reported
 * credential. A credential that revoked nothing is stood for by a random hash
 * marked `changed`, which costs the gateways a lookup of a hash they do not
 * hold and leaves nothing behind in Redis (a `changed` entry is deleted, not
 * written). What is left is a few row writes, well within the noise of one
 * request over the Internet, and a client has 60 reports an hour.
 */
import { randomBytes } from 'node:crypto'
import { inTransaction } from '@scoped/shared/db'
import type { PoolClient } from '@scoped/shared/db'
import type { KeyInvalidation } from '@scoped/shared/key-state'
import { currentTransactionId } from '@scoped/shared/key-store'
import { hashKey } from '@scoped/shared/keys'
import type { Actor } from '../audit/actor.js'
import { actorText } from '../audit/actor.js'
import type { LeakReport } from '../audit/audit-log.js'
import { recordAuditEvent } from '../audit/audit-log.js'
import type { KeyContext } from '../keys/key-context.js'
import type { KeyRow } from '../keys/key-records.js'
import { KEY_COLUMNS, recordKeyEvent, revokedInvalidation } from '../keys/key-records.js'
import { keyStatus } from '../keys/key-status.js'
import type { LeakedKeyAction } from './leak-config.js'

/** One reported credential and where it was found. */
export interface ReportedLeak {
  token: string
  report: LeakReport
}

export interface LeakResponse {
  /** Per reported credential, in order: whether a key with its hash exists (active or not). */
  exists: boolean[]
  /** Keys revoked by this report (ids). */
  revoked: string[]
  /** Active keys kept and only recorded (LEAKED_KEY_ACTION=notify). */
  notified: string[]
}

/** The actor of a leak response's events: the reporter, with its client address. */
export function leakReporter(kind: 'github' | 'report', clientAddress: string | null): Actor {
  return { kind: 'cli', id: kind === 'github' ? 'github-secret-scanning' : 'credential-report', clientAddress }
}

/** A hash no key has: the stand-in for a credential that revoked nothing. */
function standIn(): KeyInvalidation {
  return { hash: randomBytes(32).toString('hex'), state: 'changed' }
}

async function lockByHash(client: PoolClient, hashes: readonly string[]): Promise<KeyRow[]> {
  // Ordered, so two reports naming the same keys lock them in the same order.
  const { rows } = await client.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE key_hash = ANY($1::text[]) ORDER BY id FOR UPDATE`, [hashes])
  return rows
}

/**
 * Looks the reported credentials up and responds to each active key found.
 * Resolves once every gateway replica has confirmed; when one has not, throws
 * InvalidationNotConfirmed (the revocations are committed all the same, and
 * refused everywhere within the stated bound).
 */
export async function respondToLeaks(context: KeyContext, leaks: readonly ReportedLeak[], actor: Actor, action: LeakedKeyAction): Promise<LeakResponse> {
  const hashes = leaks.map((leak) => hashKey(leak.token))
  const { rows, responded, xid } = await inTransaction(context.pool, async (client) => {
    const found = await lockByHash(client, hashes)
    const now = context.now()
    const active = found.filter((row) => keyStatus({ revokedAt: row.revoked_at, expiresAt: row.expires_at }, now) === 'active')
    for (const row of active) {
      const leak = leaks[hashes.indexOf(row.key_hash)]!
      await recordAuditEvent(client, {
        type: 'key.leaked',
        actor,
        agencyId: row.agency_id,
        subAccountId: row.sub_account_id,
        keyId: row.id,
        keyName: row.name,
        scope: row.scope,
        leak: leak.report,
      })
      if (action !== 'revoke') continue
      await client.query(`UPDATE api_keys SET revoked_at = now(), revoked_by = $2 WHERE id = $1`, [row.id, actorText(actor)])
      await recordKeyEvent(client, row, 'key.revoked', actor)
    }
    return { rows: found, responded: active, xid: await currentTransactionId(client) }
  })
  const revoked = action === 'revoke' ? responded : []
  const invalidations: KeyInvalidation[] = revoked.map(revokedInvalidation)
  while (invalidations.length < leaks.length) invalidations.push(standIn())
  await context.invalidate({ keys: invalidations, xid }, revoked.length === 1 ? 'The leaked key was revoked' : 'The leaked keys were revoked')
  const existing = new Set(rows.map((row) => row.key_hash))
  return {
    exists: hashes.map((hash) => existing.has(hash)),
    revoked: revoked.map((row) => row.id),
    notified: action === 'revoke' ? [] : responded.map((row) => row.id),
  }
}
