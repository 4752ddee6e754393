/**
 * A gateway replica's usage counting at scale, in a process of its own (so
 * that its heap holds nothing but what is measured; run with --expose-gc):
 * the real UsageRecorder counts requests of `keys` distinct keys within one
 * minute, each request its own decision object as the gate makes it, then
 * flushes them to Postgres with the real batch writer. Measured: the heap
 * (and off-heap typed-array memory) the counts hold, after a full GC, over
 * what the keys' states already held; the time of one flush of them all,
 * first as new rows, then again as additions to the same rows (what every
 * later flush of that minute does); then the time of each flush when the
 * same requests come spread over a minute's flushes. Each flush writes its
 * parts on `writers` connections at once (USAGE_FLUSH_CONNECTIONS: the
 * environment's, as a replica reads it). Prints one JSON line
 * (UsageReplicaFigures).
 *
 * Usage: node --expose-gc … usage-scale-replica.ts <database URL> <keys>
 */
import { randomUUID } from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import type { ActiveKeyState } from '@scoped/shared/key-state'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { signedTenant } from '@scoped/gateway/key-policy'
import { KeyDecision, KeyRefusal } from '@scoped/gateway/request-state'
import type { RequestOutcome } from '@scoped/gateway/outcomes'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { ScopedRoute } from '@scoped/gateway/route-map'
import { DEFAULT_USAGE_OPTIONS, UsageRecorder } from '@scoped/gateway/usage/usage-recorder'
import { readUsageOptions } from '@scoped/gateway/usage/usage-config'
import { rollUpUsage } from '@scoped/shared/usage-store'

export interface UsageReplicaFigures {
  keys: number
  /** The parts of a busy flush written at once (USAGE_FLUSH_CONNECTIONS). */
  writers: number
  requests: number
  /** Minute rows the first flush wrote (one per key, route, outcome and status class): the cells counted. */
  cells: number
  /** Heap used and off-heap typed-array memory held by the counts, in bytes, after a full GC. */
  heapBytes: number
  externalBytes: number
  countSeconds: number
  /** The flush of new rows, then the flush adding to the same rows (and how many attempts each took: more than one when a write passed its deadline). */
  firstFlushMs: number
  secondFlushMs: number
  flushAttempts: number[]
  /**
   * The same keys' requests spread over the minute as a replica flushes it
   * (every USAGE_FLUSH_INTERVAL, 5 s: twelve flushes, each with a twelfth of
   * the keys): every flush's time, in order.
   */
  spreadFlushMs: number[]
  /** The rollup (migration 026) of the hour that holds all of the above: its minutes summed into hour rows, once. */
  rollupMs: number
}

/** Flushes in a minute at the default interval. */
const FLUSHES_PER_MINUTE = 12

const KEYS_PER_SUB_ACCOUNT = 20
const SUB_ACCOUNTS_PER_AGENCY = 10

const routes = parseRouteMap(
  [
    'routes:',
    '  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }',
    '  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }',
    '  - { prefix: /v1/contacts, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }',
    '',
  ].join('\n'),
  'bench',
)

/** What the key cache holds for each key before any request (its state, and so its id and tenant): not the counts' memory. */
function keyStates(count: number): ActiveKeyState[] {
  const states: ActiveKeyState[] = []
  let agencyId = ''
  let subAccountId = ''
  for (let i = 0; i < count; i++) {
    if (i % (KEYS_PER_SUB_ACCOUNT * SUB_ACCOUNTS_PER_AGENCY) === 0) agencyId = randomUUID()
    if (i % KEYS_PER_SUB_ACCOUNT === 0) subAccountId = randomUUID()
    const state: ActiveKeyState = { status: 'active', tenant: { scope: 'SUB-ACCOUNT', keyId: randomUUID(), agencyId, subAccountId } }
    // The tenant a decision carries is made once per key state and kept beside it (key-policy.ts).
    signedTenant(state)
    states.push(state)
  }
  return states
}

/**
 * One minute's requests of key `i`: a few served on one or two routes, and on
 * some keys a rate-limited answer, a refusal by the key's expiry or a 5xx, as
 * a busy tenant's keys show them.
 */
function requestsOf(i: number): Array<{ route: number; outcome: RequestOutcome; status: number }> {
  const requests: Array<{ route: number; outcome: RequestOutcome; status: number }> = []
  for (let r = 0; r < 1 + (i % 4); r++) requests.push({ route: i % 3, outcome: 'forwarded', status: 200 })
  if (i % 3 === 0) requests.push({ route: (i + 1) % 3, outcome: 'forwarded', status: 201 })
  if (i % 10 === 0) requests.push({ route: i % 3, outcome: 'rate-limited', status: 429 })
  if (i % 25 === 0) requests.push({ route: i % 3, outcome: 'expired', status: 401 })
  if (i % 50 === 0) requests.push({ route: i % 3, outcome: 'upstream-error', status: 502 })
  return requests
}

function record(usage: UsageRecorder, state: ActiveKeyState, i: number): number {
  const target = { path: '/v1/agents/1', query: '' }
  const requests = requestsOf(i)
  for (const { route, outcome, status } of requests) {
    const scoped = routes.routes[route] as ScopedRoute
    const decision =
      outcome === 'expired'
        ? new KeyRefusal('192.0.2.7', target, scoped, 'hash', state, 'expired')
        : new KeyDecision('192.0.2.7', target, scoped, 'hash', state, 0)
    decision.outcome = outcome
    const request = { gateway: decision, id: 'req', method: 'GET', raw: { url: target.path } } as unknown as FastifyRequest
    const reply = { statusCode: status, elapsedTime: 0.4 + ((i * 7 + status) % 200) / 10 } as FastifyReply
    usage.record(request, reply)
  }
  return requests.length
}

function collect(): { heap: number; external: number } {
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error('run with node --expose-gc')
  gc()
  gc()
  const memory = process.memoryUsage()
  return { heap: memory.heapUsed, external: memory.arrayBuffers }
}

/**
 * The time until the batch is written: a flush that took longer than the
 * recorder's write deadline is retried as a replica would (the same batch),
 * and the time counts every attempt.
 */
async function flushed(usage: UsageRecorder): Promise<{ ms: number; attempts: number }> {
  const started = performance.now()
  let attempts = 0
  do {
    attempts++
    await usage.flush()
  } while (usage.pending() > 0 && attempts < 10)
  if (usage.pending() > 0) throw new Error(`a batch was not written in ${attempts} attempts`)
  return { ms: performance.now() - started, attempts }
}

async function main(): Promise<void> {
  const [databaseUrl, keysText] = process.argv.slice(2)
  if (databaseUrl === undefined || keysText === undefined) throw new Error('usage: usage-scale-replica.ts <database URL> <keys>')
  const keys = Number(keysText)
  const { writers } = readUsageOptions(process.env)
  const pool = createPool(databaseUrl, { max: writers + 1, applicationName: 'bench usage replica' })
  try {
    // The flush interval never fires here: every flush is the bench's own, one at a time.
    const usage = new UsageRecorder(pool, createLogger('bench', 'silent'), new GatewayMetrics(routes), routes.routes, `bench-${randomUUID()}`, {
      ...DEFAULT_USAGE_OPTIONS,
      maxCells: 10_000_000,
      writers,
      // Measured, not given up: a replica's 10 s deadline would abandon a slow write and retry it.
      writeDeadlineMs: 600_000,
    })
    const states = keyStates(keys)
    // A first small batch: the connection opens and the hourly expiry runs, as in a replica that has been serving.
    record(usage, states[0]!, 0)
    await usage.flush()
    // All of it in one minute, and in one hour: wait for the next minute when this one has too little left.
    if (60_000 - (Date.now() % 60_000) < 15_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - (Date.now() % 60_000) + 100))
    const minute = Date.now() - (Date.now() % 60_000)
    // The rollup stands at the hour under way, as it does while a fleet serves: a flush writes minute rows only.
    const hour = minute - (minute % 3_600_000)
    await pool.query('UPDATE usage_rollup SET rolled_until = $1', [new Date(hour).toISOString()])
    const before = collect()
    const countStarted = performance.now()
    let requests = 0
    for (let i = 0; i < keys; i++) requests += record(usage, states[i]!, i)
    const countSeconds = (performance.now() - countStarted) / 1000
    const after = collect()
    const first = await flushed(usage)
    const { rows } = await pool.query<{ cells: string }>('SELECT count(*)::text AS cells FROM usage_minutes WHERE bucket = $1', [
      new Date(minute).toISOString(),
    ])
    for (let i = 0; i < keys; i++) record(usage, states[i]!, i)
    const second = await flushed(usage)
    const spreadFlushMs: number[] = []
    for (let slice = 0; slice < FLUSHES_PER_MINUTE; slice++) {
      for (let i = slice; i < keys; i += FLUSHES_PER_MINUTE) record(usage, states[i]!, i)
      spreadFlushMs.push((await flushed(usage)).ms)
    }
    // Early, as the bench may: a fleet rolls the hour up a minute after it ends.
    const rollupStarted = performance.now()
    if ((await rollUpUsage(pool, new Date(hour + 3_600_000), 1)) !== 1) throw new Error('the hour was not rolled up')
    const rollupMs = performance.now() - rollupStarted
    const figures: UsageReplicaFigures = {
      keys,
      writers,
      requests,
      cells: Number(rows[0]!.cells),
      heapBytes: after.heap - before.heap,
      externalBytes: after.external - before.external,
      countSeconds,
      firstFlushMs: first.ms,
      secondFlushMs: second.ms,
      flushAttempts: [first.attempts, second.attempts],
      spreadFlushMs,
      rollupMs,
    }
    // states stay reachable until here: the key cache holds them in a replica.
    if (states.length !== keys) throw new Error('unreachable')
    process.stdout.write(`${JSON.stringify(figures)}\n`)
  } finally {
    await pool.end()
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)
