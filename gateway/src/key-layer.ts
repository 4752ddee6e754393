/**
 * Everything the gateway knows about keys, assembled: the in-process cache,
 * the invalidation log follower (Postgres: the backstop that decides whether
 * cached states are believed), the invalidation listener (Redis: the fast
 * path), the Redis cache layer, the verifier, the last-use recorder and the
 * failed-authentication throttle. Started before the API listens; stopped
 * after it has drained.
 */
import { withDeadline } from '@scoped/shared/deadline'
import type { Pool } from '@scoped/shared/db'
import { KeyStateCodec } from '@scoped/shared/key-state'
import { keySchemaMissing, lookupKeyByHash } from '@scoped/shared/key-store'
import type { Logger } from '@scoped/shared/logger'
import type { Redis } from '@scoped/shared/redis'
import { connectRedis } from '@scoped/shared/redis'
import { AuthFailureThrottle } from './rate-limit/auth-failure-throttle.js'
import type { GatewayConfig } from './config.js'
import { InvalidationFollower } from './invalidation-follower.js'
import { IssuedKeyGate } from './issued-keys/issued-key-gate.js'
import { IssuedKeyCounts, registerIssuedKeyMetrics } from './issued-keys/issued-key-metrics.js'
import { IssuedKeys } from './issued-keys/issued-keys.js'
import { UnknownKeyBudget } from './issued-keys/unknown-key-budget.js'
import { InvalidationListener } from './invalidation-listener.js'
import { KeyCache } from './key-cache.js'
import { KeyVerifier } from './key-verifier.js'
import type { KeyStore } from './key-verifier.js'
import { LastUseRecorder } from './last-used.js'
import type { GatewayMetrics } from './metrics.js'
import { RedisLeaseStore } from './rate-limit/redis-store.js'
import { RateLimiter } from './rate-limit/limiter.js'
import { RedisKeyCache } from './redis-key-cache.js'

export interface RedisClients {
  commands: Redis
  subscriber: Redis
}

export interface KeyLayer {
  cache: KeyCache
  /** Postgres, the source of truth the verifier reads past the caches (readiness runs it too). */
  store: KeyStore
  verifier: KeyVerifier
  follower: InvalidationFollower
  listener: InvalidationListener | null
  lastUse: LastUseRecorder
  throttle: AuthFailureThrottle
  limiter: RateLimiter
  /** Every issued key's hash (issued-keys/), loaded at start. */
  issued: IssuedKeys
  /** What the gate asks of the filter, with the unknown-key budget. */
  issuedKeys: IssuedKeyGate
  start(): Promise<void>
  stop(): Promise<void>
}

/** How long a gateway waits at start for the migrations its key lookup needs, as the services wait for theirs (migrateOrWait). */
export const SCHEMA_WAIT_MS = 60_000
/** One check's limit: a Postgres that does not answer is not waited for at start (the invalidation log follower's bound). */
const SCHEMA_CHECK_TIMEOUT_MS = 1_500

/**
 * At start: waits until the database has every column the key lookup reads
 * (a replica of a new build may start before the migration job has run),
 * for up to `waitMs`, then fails naming what is missing; without it every
 * key not yet cached would get 503. Postgres unreachable is not waited for
 * here: the gateway starts and answers 503 until it is back, as before.
 */
export async function waitForKeySchema(pool: Pool, log: Logger, waitMs = SCHEMA_WAIT_MS, pollMs = 1_000): Promise<void> {
  const deadline = Date.now() + waitMs
  let told = false
  for (;;) {
    let missing: string | undefined
    try {
      missing = await withDeadline(keySchemaMissing(pool), SCHEMA_CHECK_TIMEOUT_MS, 'the schema check')
    } catch (error) {
      log.warn({ err: error }, 'could not check the database schema at start')
      return
    }
    if (missing === undefined) return
    if (!told) log.info({ missing }, 'waiting for the migration job')
    told = true
    if (Date.now() >= deadline) {
      throw new Error(
        `the database lacks what the key lookup reads (${missing}): run \`ctl migrate\` as the schema owner (docs/operations.md, "Database roles")`,
      )
    }
    await new Promise((resolve) => setTimeout(resolve, pollMs))
  }
}

export function createKeyLayer(
  config: GatewayConfig,
  pool: Pool,
  redis: RedisClients | null,
  replicaId: string,
  metrics: GatewayMetrics,
  log: Logger,
): KeyLayer {
  const cache = new KeyCache()
  const codec = new KeyStateCodec(config.keyCacheSecret)
  const prefix = config.redis?.keyPrefix ?? ''
  const issued: IssuedKeys = new IssuedKeys({ pool, log, current: () => cache.isCurrent(performance.now()), following: (): boolean => follower.following })
  const budget = new UnknownKeyBudget()
  const counts = new IssuedKeyCounts()
  registerIssuedKeyMetrics(metrics.registry, issued, budget, counts)
  const follower: InvalidationFollower = new InvalidationFollower({ pool, cache, replicaId, log, metrics, known: issued })
  metrics.logAge(() => Math.max(0, (performance.now() - follower.lastSuccessAt) / 1000))
  metrics.cacheSizes(() => cache.size())
  const listener =
    redis === null
      ? null
      : new InvalidationListener({ subscriber: redis.subscriber, commands: redis.commands, prefix, codec, cache, replicaId, log, metrics, known: issued })
  const shared = redis === null ? null : new RedisKeyCache(redis.commands, prefix, codec, (error) => log.debug({ err: error }, 'redis key cache write failed'))
  const store: KeyStore = { lookup: (hash) => lookupKeyByHash(pool, hash) }
  const verifier = new KeyVerifier({ store, shared, cache, metrics, log })
  const lastUse = new LastUseRecorder(pool, log)
  lastUse.onWrite = () => metrics.countRoundTrip('postgres')
  const throttle = new AuthFailureThrottle({
    ...(redis === null ? {} : { redis: redis.commands, prefix }),
    limit: config.authFailures.limit,
    windowMs: config.authFailures.windowMs,
    onError: (error) => log.debug({ err: error }, 'failed-authentication throttle: Redis unavailable; counting in this replica'),
  })
  const limiter = new RateLimiter({
    store: redis === null ? null : new RedisLeaseStore(redis.commands, prefix),
    replicas: () => follower.liveReplicas,
    onStoreError: (error) => log.debug({ err: error }, 'rate limits: Redis unavailable; each replica keeps its share locally'),
  })
  return {
    cache,
    store,
    verifier,
    follower,
    listener,
    lastUse,
    throttle,
    limiter,
    issued,
    issuedKeys: new IssuedKeyGate(issued, budget, counts),
    async start() {
      await waitForKeySchema(pool, log)
      if (redis !== null) {
        await connectRedis(redis.commands).catch((error: unknown) =>
          log.warn({ err: error }, 'redis unavailable at start; keys are read from Postgres until it is back'),
        )
        await listener!.start()
      }
      await follower.start()
      if (!follower.current) log.warn('invalidation log unreachable at start; keys are checked against Postgres (or answer 503) until it is back')
      // After the follower's first snapshot, so that the load and the log between them miss no key.
      await issued.start()
      lastUse.start()
    },
    async stop() {
      await limiter.close()
      await lastUse.stop()
      await issued.stop()
      await follower.stop()
      await listener?.stop()
      redis?.commands.disconnect()
    },
  }
}
