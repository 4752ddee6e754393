/**
 * An agency's server calls from one address with its sub-accounts' keys,
 * through two real gateway replicas and a private Redis that is killed part
 * way. That address has just sent 300 keys never issued (and is throttled for
 * them), 40 uses of a revoked key and uses of an expired one. Every issued,
 * active key still gets 200 on its first use, on either replica, while keys
 * are created (in process and through `ctl`), rolled and revoked under load,
 * after Redis died, and after a replica restarts with Redis down. Revoked,
 * expired and rolled-away keys get their 401 (known keys, never counted as
 * guesses); keys never issued get 401 or 429 (or 503 when the replica could
 * not vouch for them and the unknown-key budget was spent: never a pass).
 */
import t from 'tap'
import { createKeyInvalidator } from '@scoped/agency-service/invalidator'
import { KeyService } from '@scoped/agency-service/keys/key-service'
import type { KeyOwner } from '@scoped/agency-service/keys/key-service'
import { errorCatalog } from '@scoped/shared/errors'
import { generateKey } from '@scoped/shared/keys'
import { readKeyCacheSecret } from '@scoped/shared/secrets'
import { runCtl } from '../helpers/processes.js'
import { startRedisServer } from '../helpers/redis-server.js'
import { startStack } from '../helpers/stack.js'
import { waitFor } from '../helpers/wait-for.js'
import type { Answer } from './innocent.js'
import { connect, subAccounts } from './innocent.js'
import { sleep } from './support.js'

const SERVER_ADDRESS = '127.0.0.60'
// Rounds of create + roll or revoke under load; Redis dies after half of them, whatever the machine's speed.
const ROUNDS = Number(process.env['LOAD_ROUNDS'] ?? 8)
const LOOPS = 6

interface KeyRef {
  key: string
  /** Its id, for a roll or revoke; undefined: never issued. */
  id?: string
  /** performance.now() when its creation returned; undefined: never issued. */
  createdAt?: number
  /** When a revoke or roll of it began, and when that returned. */
  endStartedAt?: number
  endedAt?: number
}

interface Sample {
  ref: KeyRef
  replica: number
  sentAt: number
  doneAt: number
  answer?: Answer
  error?: string
}

/**
 * What each answer must be: 200 for a key valid throughout, 401 for one ended before it was sent, 401 or 429 for one never
 * issued (503 when the replica could not vouch for it and its budget was spent: a starved machine delays the log polls).
 */
function judge(sample: Sample): string | undefined {
  const { ref, answer } = sample
  if (answer === undefined) return `transport error ${sample.error}`
  if (ref.createdAt === undefined) return [401, 429, 503].includes(answer.status) ? undefined : `never issued: ${answer.status}`
  if (ref.endStartedAt === undefined || sample.doneAt < ref.endStartedAt) return answer.status === 200 ? undefined : `valid: ${answer.status} ${answer.message}`
  if (ref.endedAt !== undefined && sample.sentAt > ref.endedAt) return answer.status === 401 ? undefined : `ended: ${answer.status} ${answer.message}`
  return answer.status === 200 || answer.status === 401 ? undefined : `ending: ${answer.status} ${answer.message}`
}

t.test('an agency server’s issued keys are never refused for what its address sent, across Redis dying and a restart', async (t) => {
  const redis = await startRedisServer(t)
  const stack = await startStack(t, { replicas: 2, redis: { url: redis.url }, backendEnv: { agency: { REDIS_URL: '' }, resource: { REDIS_URL: '' } } })
  const invalidator = createKeyInvalidator(
    stack.db.pool,
    { redisUrl: redis.url, redisKeyPrefix: stack.redis.prefix, keyCacheSecret: readKeyCacheSecret(stack.env) },
    'innocent-driver',
  )
  t.teardown(() => invalidator.close())
  const service = new KeyService(stack.db.pool, invalidator)
  const owners = await subAccounts(stack, 3)
  const live: KeyRef[] = []
  const ended: KeyRef[] = []
  const create = async (owner: KeyOwner, viaCtl = false): Promise<KeyRef> => {
    let key: string
    let id: string
    if (viaCtl) {
      const result = await runCtl(['key', 'create', '--sub-account', (owner as { subAccountId: string }).subAccountId, '--name', 'ctl'], stack.ctlEnv)
      if (result.status !== 0) throw new Error(`ctl key create failed: ${result.stderr}`)
      ;({ id, key } = result.json as { id: string; key: string })
    } else {
      ;({ id, key } = await service.create(owner, 'server', 'test'))
    }
    const ref: KeyRef = { id, key, createdAt: performance.now() }
    live.push(ref)
    return ref
  }
  for (const owner of owners) for (let i = 0; i < 2; i++) await create(owner)
  const sends = (localAddress: string) => stack.replicas.map((replica) => connect(t, stack, replica.port, localAddress))
  const [one, two] = sends(SERVER_ADDRESS)

  // The server's address: 300 keys never issued, 40 uses of a revoked key, uses of an expired one.
  const never = await Promise.all(Array.from({ length: 300 }, (_, i) => (i % 2 === 0 ? one! : two!)(generateKey())))
  t.ok(
    never.every((answer) => [401, 429, 503].includes(answer.status)),
    'keys never issued: 401 or 429 (503 only while the replica could not vouch for them)',
  )
  t.ok(
    never.some((answer) => answer.status === 429),
    'the address is throttled for them',
  )
  const revoked = await service.create(owners[0]!, 'to revoke', 'test')
  await service.revoke(revoked.id, 'test')
  const revokedAnswers = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? one! : two!)(revoked.key)))
  t.same(new Set(revokedAnswers.map((a) => `${a.status} ${a.message}`)), new Set([`401 ${errorCatalog.revokedKey.message}`]), 'a revoked key: 401, every time')
  const expiring = await service.create(owners[1]!, 'expiring', 'test', { expiresAt: new Date(Date.now() + 1_500) })
  await waitFor(() => Date.now() > Date.parse(expiring.expiresAt!) + 50, 'the key to expire', 5_000)
  const expiredAnswers = await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? one! : two!)(expiring.key)))
  t.ok(
    expiredAnswers.every((a) => a.status === 401),
    'an expired key: 401',
  )
  const viaCtl = await create(owners[2]!, true)
  const viaService = await create(owners[0]!)
  for (const ref of [viaCtl, viaService]) {
    t.same([(await one!(ref.key)).status, (await two!(ref.key)).status], [200, 200], 'a new key, first use from the throttled address: 200 on both replicas')
  }

  // Under load from that address: valid keys, ended ones and keys never issued, while keys are created, rolled and revoked; Redis dies part way.
  const samples: Sample[] = []
  let running = true
  const loops = Array.from({ length: LOOPS }, async (_, l) => {
    const replicas = sends(SERVER_ADDRESS)
    let turn = l
    while (running) {
      const roll = Math.random()
      const ref: KeyRef =
        roll < 0.1
          ? { key: generateKey() }
          : roll < 0.2 && ended.length > 0
            ? ended[Math.floor(Math.random() * ended.length)]!
            : (live.at(-1 - (turn % 4)) ?? live[0]!)
      const replica = turn++ % 2
      const sample: Sample = { ref, replica, sentAt: performance.now(), doneAt: 0 }
      try {
        sample.answer = await replicas[replica]!(ref.key)
      } catch (error) {
        sample.error = (error as Error).message
      }
      sample.doneAt = performance.now()
      samples.push(sample)
    }
  })
  const end = async (ref: KeyRef, action: () => Promise<unknown>): Promise<void> => {
    live.splice(live.indexOf(ref), 1)
    ref.endStartedAt = performance.now()
    await action()
    ref.endedAt = performance.now()
    ended.push(ref)
  }
  let redisKilledAt = Infinity
  for (let operations = 0; operations < ROUNDS; operations++) {
    if (operations === ROUNDS / 2) {
      await redis.stop()
      redisKilledAt = performance.now()
    }
    const owner = owners[operations % owners.length]!
    await create(owner, operations === 3)
    const oldest = live[0]!
    const id = oldest.id!
    if (operations % 2 === 0) {
      await end(oldest, async () => {
        const rolled = await service.roll(id, 'test', undefined, { graceSeconds: 0 })
        live.push({ id: rolled.id, key: rolled.key, createdAt: performance.now() })
      })
    } else {
      await end(oldest, () => service.revoke(id, 'test'))
    }
    await sleep(200)
  }
  running = false
  await Promise.all(loops)
  const wrong = samples.map((sample) => ({ sample, why: judge(sample) })).filter((row) => row.why !== undefined)
  const count = (test: (sample: Sample) => boolean) => samples.filter(test).length
  t.comment(
    `load: ${samples.length} requests from one address over ${ROUNDS} rounds of create + roll or revoke; ` +
      `${count((s) => s.answer?.status === 200)} answered 200, ${count((s) => s.answer?.status === 401)} 401, ${count((s) => s.answer?.status === 429)} 429; ` +
      `${count((s) => s.sentAt > redisKilledAt)} after Redis died; wrong: ${wrong.length}`,
  )
  t.ok(redisKilledAt < Infinity && count((s) => s.sentAt > redisKilledAt && s.answer?.status === 200) > 0, 'valid keys were used after Redis died')
  t.same(
    wrong.slice(0, 5).map(({ sample, why }) => ({ why, replica: sample.replica + 1, afterRedisDied: sample.sentAt > redisKilledAt })),
    [],
    'every answer as it must be: 200 for every valid key, 401 for ended keys, 401 or 429 for keys never issued',
  )

  // Replica 2 restarts with Redis still down: its filter is loaded before it is ready, and the server's keys work at once.
  t.equal(await stack.replicas[1]!.stop('SIGTERM'), 0, 'replica 2 stopped')
  const restarted = await stack.startReplica()
  const readyz = await waitFor(
    async () => {
      const response = await fetch(`http://127.0.0.1:${restarted.adminPort}/readyz`)
      return response.status === 200 ? ((await response.json()) as { checks: Record<string, boolean> }) : undefined
    },
    'the restarted replica to be ready',
    30_000,
  )
  t.equal(readyz.checks['issuedKeys'], true, 'ready with its issued-key filter loaded')
  const fresh = connect(t, stack, restarted.port, SERVER_ADDRESS)
  const unknown = await fresh(generateKey())
  t.ok([401, 429, 503].includes(unknown.status), 'a key never issued: refused')
  const afterRestart = await Promise.all(live.map(async (ref) => (await fresh(ref.key)).status))
  t.same(afterRestart, Array<number>(live.length).fill(200), 'every valid key, first use on the restarted replica: 200')
  const createdNow = await create(owners[1]!)
  t.same([(await one!(createdNow.key)).status, (await fresh(createdNow.key)).status], [200, 200], 'a key created while Redis is down: 200 on both')
  const endedNow = await Promise.all(ended.slice(-5).map(async (ref) => (await fresh(ref.key)).status))
  t.same(endedNow, Array<number>(endedNow.length).fill(401), 'rolled-away and revoked keys: 401 on the restarted replica')
})
