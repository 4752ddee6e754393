/**
 * Someone with write access to Redis (redis-cli, here an ioredis client)
 * but not the key-cache secret. Whatever they write, a key acts only as its
 * own tenant, an unknown key stays unknown, and a revoke is confirmed only
 * by real replicas:
 *   - `<prefix>key:<sha256 of one's own valid key>` set to an entry naming
 *     another agency: the old unsealed JSON shape, an entry sealed with a
 *     wrong secret, and a genuine entry moved from the victim's key. A fresh
 *     replica, and a replica whose in-memory entry has gone, read it and
 *     ignore it: the backend answers for the key's own tenant;
 *   - the same entries under a random unknown key's hash: 401;
 *   - fake acknowledgements pushed on the ack list during a revoke (random
 *     MACs, a wrong secret, a genuine one replayed from another message):
 *     with one replica stopped (SIGSTOP), the revoke does not return before
 *     that replica has stopped being live, through ctl or in process.
 */
import { randomBytes } from 'node:crypto'
import t from 'tap'
import type { Test } from 'tap'
import type { Pool } from '@scoped/shared/db'
import { LIVE_WINDOW_MS } from '@scoped/shared/key-invalidation'
import type { KeyState } from '@scoped/shared/key-state'
import { KeyStateCodec, redisNames } from '@scoped/shared/key-state'
import { generateKey, hashKey } from '@scoped/shared/keys'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import type { Tenant } from '@scoped/shared/tenant-signature'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { CreatedKey } from '@scoped/agency-service/keys/key-service'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import type { HttpsClient } from '../helpers/https.js'
import { httpsClient } from '../helpers/https.js'
import { startRedisServer } from '../helpers/redis-server.js'
import type { StackReplica } from '../helpers/stack.js'
import { startStack } from '../helpers/stack.js'
import { waitFor } from '../helpers/wait-for.js'
import { appliedBy, COMMAND_LIMIT_MS, createTenancy, ctlConnected, get, INVALID, registry, replicaIdOf, REVOKED, signal, timedCtl } from './support.js'

type Forgery = 'unsealed JSON' | 'sealed with a wrong secret' | "the victim's genuine entry, moved"
const FORGERIES: Forgery[] = ['unsealed JSON', 'sealed with a wrong secret', "the victim's genuine entry, moved"]

async function forgedEntries(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  return Number(/gateway_key_cache_forged_total\{kind="entry"\} (\d+)/.exec(text)?.[1] ?? 0)
}

/** The replicas whose applied snapshot in the registry includes transaction `xid` (they have applied what it wrote to the log). */
async function appliedTransaction(pool: Pool, xid: string): Promise<string[]> {
  const { rows } = await pool.query<{ replica_id: string }>(
    `SELECT replica_id FROM gateway_replicas WHERE pg_visible_in_snapshot($1::xid8, applied_snapshot)`,
    [xid],
  )
  return rows.map((row) => row.replica_id)
}

t.test('forged Redis entries and acknowledgements', async (t) => {
  const root = t
  const redis = await startRedisServer(t)
  const stack = await startStack(t, { replicas: 1, redis: { url: redis.url } })
  const names = redisNames(stack.redis.prefix)
  const attacker = redis.client()
  const genuine = new KeyStateCodec(readKeyCacheSecret({ TENANT_SIGNING_SECRET: stack.secret })!)
  const wrong = new KeyStateCodec(randomBytes(32))

  const own = await createTenancy(stack.db.pool, 'Own Agency')
  const victim = await createTenancy(stack.db.pool, 'Victim Agency')
  await stack.db.pool.query(`INSERT INTO agents (sub_account_id, name) VALUES ($1, $2), ($3, $4)`, [
    own.sub.id,
    `agent of ${own.sub.name}`,
    victim.sub.id,
    `agent of ${victim.sub.name}`,
  ])
  const victimKeys = { AGENCY: await victim.agencyKey('victim agency'), 'SUB-ACCOUNT': await victim.subKey('victim sub-account') }
  const victimTenant = (scope: 'AGENCY' | 'SUB-ACCOUNT'): Tenant => ({
    scope,
    agencyId: victim.agency.id,
    subAccountId: scope === 'AGENCY' ? null : victim.sub.id,
    keyId: victimKeys[scope].id,
  })

  // The victim's keys are used on replica 1, which writes their genuine entries to Redis.
  const first = httpsClient(t, stack.replicas[0]!.port, stack.cert)
  t.equal((await get(first, '/v1/agency', victimKeys.AGENCY.key)).status, 200)
  t.equal((await get(first, '/v1/agents', victimKeys['SUB-ACCOUNT'].key)).status, 200)
  // Those writes follow the answers: wait until both entries are there.
  const victimEntries = await waitFor(async () => {
    const [agency, sub] = await Promise.all([
      attacker.get(names.cacheEntry(hashKey(victimKeys.AGENCY.key))),
      attacker.get(names.cacheEntry(hashKey(victimKeys['SUB-ACCOUNT'].key))),
    ])
    return agency !== null && sub !== null && { AGENCY: agency, 'SUB-ACCOUNT': sub }
  }, "replica 1 to write the victim's genuine entries to Redis")
  t.ok(victimEntries.AGENCY && victimEntries['SUB-ACCOUNT'], "the victim's genuine entries are in Redis")

  function forge(kind: Forgery, hash: string, scope: 'AGENCY' | 'SUB-ACCOUNT'): string {
    const claim: KeyState = { status: 'active', tenant: victimTenant(scope) }
    switch (kind) {
      case 'unsealed JSON':
        return JSON.stringify(claim)
      case 'sealed with a wrong secret':
        return wrong.encodeEntry(hash, claim, Date.now() + 300_000)
      default:
        return victimEntries[scope]
    }
  }

  // One's own valid keys, never used anywhere yet, each with a forged entry naming the victim.
  const ownKeys: { scope: 'AGENCY' | 'SUB-ACCOUNT'; kind: Forgery; key: CreatedKey; text: string }[] = []
  for (const scope of ['AGENCY', 'SUB-ACCOUNT'] as const) {
    for (const kind of FORGERIES) {
      const key = scope === 'AGENCY' ? await own.agencyKey(kind) : await own.subKey(kind)
      const text = forge(kind, hashKey(key.key), scope)
      await attacker.set(names.cacheEntry(hashKey(key.key)), text, 'EX', 3600)
      ownKeys.push({ scope, kind, key, text })
    }
  }
  const unknownKeys = FORGERIES.map((kind) => ({ kind, key: generateKey() }))
  for (const { kind, key } of unknownKeys) await attacker.set(names.cacheEntry(hashKey(key)), forge(kind, hashKey(key), 'AGENCY'), 'EX', 3600)

  /** Every own key acts as its own tenant on `client`; every unknown key is refused. */
  async function actsAsItself(t: Test, client: HttpsClient, where: string): Promise<void> {
    for (const { scope, kind, key } of ownKeys) {
      if (scope === 'AGENCY') {
        const response = await get(client, '/v1/agency', key.key)
        t.equal(response.status, 200, `${where}, agency key, ${kind}: 200`)
        t.same(
          response.json?.data && { id: response.json.data.id, name: response.json.data.name },
          { id: own.agency.id, name: own.agency.name },
          'its own agency, never the victim',
        )
      } else {
        const response = await get(client, '/v1/agents', key.key)
        t.equal(response.status, 200, `${where}, sub-account key, ${kind}: 200`)
        t.same(
          (response.json?.data ?? []).map((agent: { name: string }) => agent.name),
          [`agent of ${own.sub.name}`],
          "its own sub-account's agent, never the victim's",
        )
      }
    }
    for (const { kind, key } of unknownKeys) {
      const response = await get(client, '/v1/agency', key)
      t.equal(response.status, 401, `${where}, unknown key, ${kind}: 401`)
      t.equal(response.json?.message, INVALID)
    }
  }

  let secondClient!: HttpsClient

  await t.test('a fresh replica, and the first replica, which never saw these keys', async (t) => {
    const second = await stack.startReplica()
    secondClient = httpsClient(root, second.port, stack.cert)
    const before = await forgedEntries(second.adminPort)
    await actsAsItself(t, secondClient, 'fresh replica')
    await actsAsItself(t, first, 'first replica')
    const counted = (await forgedEntries(second.adminPort)) - before
    // Keys never issued are answered from the issued-key filter: their forged entries are never even read.
    t.ok(counted >= ownKeys.length, `the fresh replica read each forged entry of an issued key and refused it (${counted} counted)`)
  })

  await t.test('after the in-memory entries are gone, Redis is read again and still refused', async (t) => {
    // The gateways write Redis by compare-and-set on a version these forgeries lack: they are still there.
    for (const { key, text } of ownKeys) t.equal(await attacker.get(names.cacheEntry(hashKey(key.key))), text, 'the forged entry is untouched')
    // A change of the keys' records (through the log, as a key update would) makes every replica forget them.
    const { rows } = await stack.db.pool.query<{ xid: string }>(
      `INSERT INTO key_invalidations (key_hash, state) SELECT unnest($1::text[]), 'changed' RETURNING xid::text AS xid`,
      [ownKeys.map(({ key }) => hashKey(key.key))],
    )
    // Applied once every replica reports in the registry a snapshot that includes that transaction: it records
    // a snapshot only after it has applied the changes it read up to it (what a revoker's confirmation relies on).
    const replicaIds = await Promise.all(stack.replicas.map((replica) => replicaIdOf(stack.db.pool, replica.pid)))
    await waitFor(async () => {
      const applied = await appliedTransaction(stack.db.pool, rows[0]!.xid)
      return replicaIds.every((id) => applied.includes(id))
    }, 'every replica to apply the changed keys from the invalidation log')
    const before = await Promise.all(stack.replicas.map((replica) => forgedEntries(replica.adminPort)))
    await actsAsItself(t, secondClient, 'second replica, memory gone')
    await actsAsItself(t, first, 'first replica, memory gone')
    const after = await Promise.all(stack.replicas.map((replica) => forgedEntries(replica.adminPort)))
    after.forEach((count, i) => t.ok(count - before[i]! >= ownKeys.length, `replica ${i + 1} read the forged entries again and refused them`))
  })

  /**
   * Listens on the invalidation channel like a replica, and answers every
   * message with fake acknowledgements pushed to the head of its list:
   * random MACs, a wrong secret, a genuine ack of another message (replayed).
   */
  async function fakeAcknowledger(t: Test, impersonate: string): Promise<{ messages: string[]; pushed: number }> {
    const subscriber = redis.client()
    const pusher = redis.client()
    const seen = { messages: [] as string[], pushed: 0 }
    subscriber.on('message', (_channel: string, text: string) => {
      const id = (JSON.parse(text.slice(0, text.lastIndexOf('.'))) as { id: string }).id
      seen.messages.push(id)
      const fakes = [
        ...Array.from({ length: 4 }, () => `${impersonate}.${randomBytes(32).toString('base64url')}`),
        wrong.encodeAck(id, impersonate),
        genuine.encodeAck(`replayed-${randomBytes(4).toString('hex')}`, impersonate),
        impersonate,
        'ok',
      ]
      void pusher.lpush(names.acknowledgements(id), ...fakes).then(() => (seen.pushed += fakes.length))
    })
    await subscriber.subscribe(names.channel)
    t.teardown(() => subscriber.disconnect())
    return seen
  }

  for (const via of ['ctl', 'in process'] as const) {
    await t.test(`fake acknowledgements during a revoke (${via}), one replica stopped: no success before it stops being live`, async (t) => {
      const [running, stopped] = stack.replicas as [StackReplica, StackReplica]
      const runningClient = first
      const stoppedId = await replicaIdOf(stack.db.pool, stopped.pid)
      const key = await own.subKey(`acks ${via}`)
      for (const client of [runningClient, secondClient]) for (let i = 0; i < 2; i++) t.equal((await get(client, '/v1/agents', key.key)).status, 200, 'warm')
      const forger = await fakeAcknowledger(t, stoppedId)

      let stoppedAt: number
      let returnedAt: number
      let ms: number
      if (via === 'ctl') {
        const revoke = timedCtl(['key', 'revoke', key.id], stack.ctlEnv, stack.db)
        await ctlConnected(stack.db.pool, stack.db.name)
        signal(stopped.pid, 'SIGSTOP')
        stoppedAt = performance.now()
        const result = await revoke
        returnedAt = Date.now()
        ms = result.workMs
        t.equal(result.status, 0, `ctl key revoke returned 0 once the stopped replica was no longer live: ${result.stderr.trim()}`)
      } else {
        const invalidator = createKeyInvalidator(
          stack.db.pool,
          { redisUrl: redis.url, redisKeyPrefix: stack.redis.prefix, keyCacheSecret: readKeyCacheSecret(stack.env) },
          'fault-test',
        )
        t.teardown(() => invalidator.close())
        const service = new KeyService(stack.db.pool, invalidator)
        // Its Redis clients connect in the background (the revoke would wait for them): both are connected, named, first.
        await waitFor(async () => {
          const list = (await attacker.call('CLIENT', 'LIST')) as string
          return ['fault-test-commands', 'fault-test-blocking'].every((name) => list.includes(` name=${name} `))
        }, "the invalidator's Redis clients to connect")
        signal(stopped.pid, 'SIGSTOP')
        stoppedAt = performance.now()
        const result = await service.revoke(key.id, 'fault-test')
        returnedAt = Date.now()
        ms = Math.round(performance.now() - stoppedAt)
        t.equal(result.invalidation.confirmed, true)
        t.ok(
          result.invalidation.acknowledged <= 1,
          `only the running replica can have acknowledged (${result.invalidation.acknowledged}); fakes count for nothing`,
        )
        t.same(result.invalidation.unconfirmed, [])
      }
      t.teardown(() => signal(stopped.pid, 'SIGCONT'))
      const heldFor = Math.round(performance.now() - stoppedAt)
      const lastSeen = (await registry(stack.db.pool)).find((row) => row.id === stoppedId)!.seenAt
      t.comment(
        `revoke (${via}) with fake acks and a stopped replica: ${ms} ms; returned ${heldFor} ms after the stop, ${returnedAt - lastSeen} ms after it was last seen`,
      )
      t.ok(ms < COMMAND_LIMIT_MS, `returned within ${COMMAND_LIMIT_MS} ms`)
      t.ok(forger.messages.length >= 1 && forger.pushed >= 8, `fake acknowledgements were pushed for the revoke (${forger.pushed})`)
      if (await appliedBy(stack.db.pool, stoppedId, hashKey(key.key))) {
        t.comment('the stopped replica had applied the revoke before it stopped (a race); nothing to wait for')
      } else {
        t.ok(returnedAt >= lastSeen + LIVE_WINDOW_MS, `not before the stopped replica stopped being live (${returnedAt - lastSeen} ms after it was last seen)`)
      }
      t.equal((await get(runningClient, '/v1/agents', key.key)).status, 401, 'the running replica refuses the key')
      t.ok(running.pid !== stopped.pid)
      const pending = get(secondClient, '/v1/agents', key.key)
      signal(stopped.pid, 'SIGCONT')
      const resumed = await pending
      t.equal(resumed.status, 401, 'the stopped replica refuses the key as soon as it resumes')
      t.equal(resumed.json?.message, REVOKED)
    })
  }
})
