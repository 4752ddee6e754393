/**
 * A grace period and an expiry ending while two gateway replicas serve the
 * key, through the whole stack as processes and the operator CLI: up to the
 * instant both replicas answer 200 (from their warm caches), and from the
 * instant both answer 401 `Invalid or revoked API key`: the clock decides on
 * every request, not a cache's lifetime, and nothing has to tell the
 * replicas when the instant comes.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { Test } from 'tap'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { runCtl } from '../helpers/processes.js'
import { startStack } from '../helpers/stack.js'

const REVOKED = { success: false, message: 'Invalid or revoked API key' }
/** Requests meant to land before the instant are sent at least this long before it: a loaded machine may be slow to answer. */
const BEFORE_MARGIN_MS = 800

const stack = await startStack(t, 2)
const replicas = stack.gatewayPorts.map((port) => httpsClient(t, port, stack.cert, { openapi: true })) as [HttpsClient, HttpsClient]
const env = { ...stack.ctlEnv, CTL_ACTOR: 'expiry-test' }

async function ctl(args: string[]): Promise<Record<string, unknown>> {
  const result = await runCtl(args, env)
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')}: ${result.stderr}`)
  return result.json as Record<string, unknown>
}

const agency = await ctl(['agency', 'create', '--name', 'Expiry'])
const sub = await ctl(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'Expiry West'])
const subId = String(sub['id'])

async function onBoth(key: string): Promise<Array<{ status: number; json: unknown }>> {
  return Promise.all(replicas.map((client) => client.request('/v1/agents', { headers: { authorization: `Bearer ${key}` } })))
}

/** Uses the key on both replicas until shortly before `instant` (200 each time), then right after it (401 on both). */
async function acrossTheInstant(t: Test, key: string, instant: number): Promise<void> {
  let before = 0
  while (Date.now() < instant - BEFORE_MARGIN_MS) {
    for (const response of await onBoth(key)) t.equal(response.status, 200, 'before the instant: 200')
    before++
    await sleep(Math.min(250, instant - BEFORE_MARGIN_MS - Date.now()))
  }
  t.ok(before >= 2, `the key was served by both replicas ${before} times before the instant`)
  await sleep(instant - Date.now() + 5)
  const sentAt = Date.now()
  t.ok(sentAt >= instant, 'sent after the instant')
  const after = await onBoth(key)
  for (const [index, response] of after.entries()) {
    t.equal(response.status, 401, `replica ${index + 1}, right after the instant: 401`)
    t.same(response.json, REVOKED)
  }
  t.ok(Date.now() - sentAt < 2_000, 'answered at once, without waiting for a cache to end')
  for (const response of await onBoth(key)) t.same(response.json, REVOKED, 'and after')
}

t.test('a roll’s grace period ends on both replicas at its instant', async (t) => {
  const old = await ctl(['key', 'create', '--sub-account', subId, '--name', 'rolling'])
  for (const response of await onBoth(String(old['key']))) t.equal(response.status, 200, 'warm on both replicas')
  // A generous grace: starting ctl takes seconds on a loaded machine, and the test needs time before the instant.
  const rolled = await ctl(['key', 'roll', String(old['id']), '--grace', '15s'])
  t.equal(rolled['replaces'], old['id'])
  const { rows } = await stack.db.pool.query<{ expires_at: Date; replaced_by: string }>(`SELECT expires_at, replaced_by FROM api_keys WHERE id = $1`, [
    old['id'],
  ])
  t.equal(rows[0]!.replaced_by, rolled['id'])
  const instant = rows[0]!.expires_at.getTime()
  t.ok(instant > Date.now() + 2 * BEFORE_MARGIN_MS, 'the grace period is still running')
  await acrossTheInstant(t, String(old['key']), instant)
  for (const response of await onBoth(String(rolled['key']))) t.equal(response.status, 200, 'the new key goes on working')
  const after = (await ctl(['key', 'list', '--sub-account', subId])) as unknown as Array<Record<string, unknown>>
  t.match(
    after.find((key) => key['id'] === old['id']),
    { status: 'expired', replacedBy: rolled['id'], revokedAt: null },
    'listed as expired, its record kept',
  )
})

t.test('an expiry chosen at creation ends the key on both replicas at its instant', async (t) => {
  const expiresAt = new Date(Date.now() + 15_000).toISOString()
  const created = await ctl(['key', 'create', '--sub-account', subId, '--name', 'short-lived', '--expires-at', expiresAt])
  t.equal(created['expiresAt'], expiresAt)
  await acrossTheInstant(t, String(created['key']), Date.parse(expiresAt))
  const listed = (await ctl(['key', 'list', '--sub-account', subId])) as unknown as Array<Record<string, unknown>>
  const item = listed.find((key) => key['id'] === created['id'])!
  t.match(item, { status: 'expired', revokedAt: null, lastUsedAt: String }, 'expired, with its record and last use kept like a revoked key')
  t.ok(Date.parse(String(item['lastUsedAt'])) < Date.parse(expiresAt), 'the refused requests after the instant are not uses')
})
