/**
 * A gateway replica as `npm run gateway` runs it (gateway/src/main.ts with
 * its configuration in the environment), every check on: key verification
 * through memory, Redis and Postgres, the invalidation log follower, a log
 * line per request (LOG_LEVEL=info), metrics, the failed-auth throttle.
 */
import type { Started } from './processes.js'
import { freePort, startNode } from './processes.js'

export interface GatewaySetup {
  databaseUrl: string
  redisUrl: string
  /** Replicas sharing it share the Redis key cache. */
  redisPrefix: string
  /** TENANT_SIGNING_SECRET (KEY_CACHE_SECRET and the audience secrets derive from it). */
  signingSecret: string
  routesFile: string
  certFile: string
  keyFile: string
  /** Extra variables (GATEWAY_AUTH_FAILURE_LIMIT, GATEWAY_TRUSTED_PROXIES …). */
  env?: Record<string, string>
}

export interface Gateway extends Started {
  apiUrl: string
  metricsUrl: string
}

export async function startGateway(name: string, setup: GatewaySetup): Promise<Gateway> {
  const [api, plain, admin] = [await freePort(), await freePort(), await freePort()]
  const started = await startNode(
    name,
    'gateway/src/main.ts',
    [],
    {
      DATABASE_URL: setup.databaseUrl,
      REDIS_URL: setup.redisUrl,
      REDIS_KEY_PREFIX: setup.redisPrefix,
      TENANT_SIGNING_SECRET: setup.signingSecret,
      ROUTES_FILE: setup.routesFile,
      TLS_CERT_FILE: setup.certFile,
      TLS_KEY_FILE: setup.keyFile,
      GATEWAY_HOST: '127.0.0.1',
      GATEWAY_PORT: String(api),
      GATEWAY_HTTP_PORT: String(plain),
      GATEWAY_ADMIN_PORT: String(admin),
      LOG_LEVEL: 'info',
      ...setup.env,
    },
    /gateway ready/,
    // BENCH_CPU_PROF=<dir>: a V8 CPU profile of each gateway, written there when it stops (open it in Chrome's DevTools).
    process.env['BENCH_CPU_PROF'] ? ['--cpu-prof', `--cpu-prof-dir=${process.env['BENCH_CPU_PROF']}`] : [],
  )
  return Object.assign(started, { apiUrl: `https://127.0.0.1:${api}`, metricsUrl: `http://127.0.0.1:${admin}/metrics` })
}
