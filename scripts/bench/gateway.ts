/**
 * A gateway replica as the image runs it (`node gateway/dist/main.js`, the
 * compiled output of `npm run build`, no TypeScript loader) with its
 * configuration in the environment, every check on: key verification
 * through memory, Redis and Postgres, the invalidation log follower, a log
 * line per request (LOG_LEVEL=info), metrics, the failed-auth throttle. Its
 * log goes to a file, as an operator's would, not to a pipe that the
 * orchestrator would have to drain on the same two cores; ready is its
 * /readyz answering 200.
 */
import { statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import type { Started } from './processes.js'
import { freePort, start } from './processes.js'

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
  /** Where each replica's log file goes (`<name>.log`). */
  logDir: string
  /** Extra variables (GATEWAY_AUTH_FAILURE_LIMIT, GATEWAY_TRUSTED_PROXIES …). */
  env?: Record<string, string>
}

export interface Gateway extends Started {
  apiUrl: string
  metricsUrl: string
  logFile: string
}

/** The compiled entry point; `npm run bench` builds it first (`tsc -b`). */
const GATEWAY_ENTRY = 'gateway/dist/main.js'

/**
 * A log file is cut back to nothing once it passes this (the replica appends,
 * so it simply goes on at the start): the soak and the flood write hundreds
 * of megabytes, and the machine's disk may be small.
 */
const LOG_FILE_LIMIT = 64 * 1024 * 1024

function keepBounded(file: string): NodeJS.Timeout {
  const timer = setInterval(() => {
    if ((statSync(file, { throwIfNoEntry: false })?.size ?? 0) > LOG_FILE_LIMIT) truncateSync(file, 0)
  }, 1_000)
  timer.unref()
  return timer
}

async function answersReady(url: string): Promise<boolean> {
  const response = await fetch(url).catch(() => null)
  await response?.body?.cancel()
  return response?.status === 200
}

export async function startGateway(name: string, setup: GatewaySetup): Promise<Gateway> {
  const [api, plain, admin] = [await freePort(), await freePort(), await freePort()]
  const logFile = join(setup.logDir, `${name.replace(/[^A-Za-z0-9]+/g, '-')}.log`)
  // BENCH_CPU_PROF=<dir>: a V8 CPU profile of each gateway, written there when it stops (open it in Chrome's DevTools).
  const profile = process.env['BENCH_CPU_PROF'] ? ['--cpu-prof', `--cpu-prof-dir=${process.env['BENCH_CPU_PROF']}`] : []
  const started = await start(
    name,
    process.execPath,
    [...profile, GATEWAY_ENTRY],
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
    () => answersReady(`http://127.0.0.1:${admin}/readyz`),
    { stdoutFile: logFile },
  )
  const bound = keepBounded(logFile)
  const stopProcess = started.stop
  return Object.assign(started, {
    apiUrl: `https://127.0.0.1:${api}`,
    metricsUrl: `http://127.0.0.1:${admin}/metrics`,
    logFile,
    async stop(graceMs?: number) {
      clearInterval(bound)
      await stopProcess(graceMs)
    },
  })
}
