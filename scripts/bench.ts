/**
 * `npm run bench`: the gateway against a bare @fastify/http-proxy, nginx and
 * the upstream alone, measured in one run on this machine (issue 11). Steps,
 * each in a file of scripts/bench/:
 *
 * 1. million-keys.ts: BENCH_KEYS rows in api_keys, the plan of the lookup
 *    statement and 2 000 lookups of unknown keys straight through pg;
 * 2. rounds.ts: warm-key throughput and latency of every target, rounds
 *    interleaved, with CPU per request, RSS and (gateway) store round trips;
 *    then paired.ts: the bare proxy with the gateway, and with the no-check
 *    forwarder (the ceiling), and the gateway with USAGE=off with the
 *    gateway (what usage counting costs), each pair at saturation in turn;
 * 3. side-by-side.ts: CPU per request of the bare proxy, the no-check
 *    forwarder and the gateway serving the same load at the same time;
 * 4. cold-paths.ts: first use of keys held only by Redis, or only by Postgres;
 * 5. soak.ts: the gateway's RSS over BENCH_SOAK_SECONDS at full load;
 * 6. flood.ts: its RSS and negative cache under BENCH_FLOOD_KEYS unknown keys;
 * 7. usage-scale.ts: a replica's usage counts of BENCH_USAGE_KEYS keys in one
 *    minute (memory, one flush) and the usage report of an agency with 1 000
 *    keys over 30 days of hourly rows (p50/p95, the plan's indexes).
 *
 * BENCH_ONLY=usage-scale runs step 7 alone (it needs Postgres only).
 *
 * Progress goes to stderr; the report (Markdown) to stdout, and the whole run
 * as JSON to bench-results/<ISO time>.json. The exit status is 0 whether or
 * not the targets are met; non-zero only when the benchmark itself fails.
 * Needs Postgres (DATABASE_URL names the server; a temporary database is made
 * and dropped) and Redis (REDIS_URL, default redis://127.0.0.1:6379; a fresh
 * key prefix, removed at the end).
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createPool } from '@scoped/shared/db'
import { generateKey } from '@scoped/shared/keys'
import { migrate } from '@scoped/shared/migrate'
import { COLD_KEYS, coldPaths } from './bench/cold-paths.js'
import type { Certificate } from './bench/fixtures.js'
import { certificate, clearPrefix, connectRedis, createTenant, insertKeys, temporaryDatabase } from './bench/fixtures.js'
import { flood } from './bench/flood.js'
import type { GatewaySetup } from './bench/gateway.js'
import { startGateway } from './bench/gateway.js'
import type { Target } from './bench/measure.js'
import { millionKeys } from './bench/million-keys.js'
import { findNginx, startNginx } from './bench/nginx.js'
import { machine } from './bench/proc-stats.js'
import { projectRoot } from '../test/helpers/processes.js'
import type { Started } from './bench/processes.js'
import { freePort, startNode } from './bench/processes.js'
import type { Settings } from './bench/report.js'
import { buildReport, markdown, writeJson } from './bench/report.js'
import { paired, SLICE_MS } from './bench/paired.js'
import { runRounds, warmUp } from './bench/rounds.js'
import { sideBySide, sideRate } from './bench/side-by-side.js'
import { loadGenerator, NODE_CLIENT } from './bench/load-generator.js'
import { SOAK_WARM_UP_SECONDS, soak } from './bench/soak.js'
import { BARE, GATEWAY, GATEWAY_RESTRICTED, GATEWAY_USAGE_OFF, NO_CHECKS } from './bench/summary.js'
import { usageScale } from './bench/usage-scale.js'
import { usageScaleMarkdown } from './bench/usage-scale-report.js'

function whole(name: string, fallback: number, min: number): number {
  const text = process.env[name]?.trim()
  if (text === undefined || text === '') return fallback
  if (!/^[0-9]+$/.test(text) || Number(text) < min) throw new Error(`${name} must be a whole number of at least ${min}, got ${JSON.stringify(text)}`)
  return Number(text)
}

function readSettings(): Settings {
  const connections = whole('BENCH_CONNECTIONS', 50, 1)
  return {
    rounds: whole('BENCH_ROUNDS', 5, 1),
    seconds: whole('BENCH_SECONDS', 5, 1),
    connections,
    soakSeconds: whole('BENCH_SOAK_SECONDS', 60, 1),
    keys: whole('BENCH_KEYS', 1_000_000, 0),
    // 1.2 × the negative cache's bound: enough to fill it and see it hold. A million
    // (BENCH_FLOOD_KEYS=1000000) takes a quarter of an hour or more on a 2-core machine.
    floodKeys: whole('BENCH_FLOOD_KEYS', 120_000, 1),
    floodConnections: Math.max(100, 2 * connections),
    sideWindows: whole('BENCH_SIDE_WINDOWS', 5, 1),
    pairedSeconds: whole('BENCH_PAIRED_SECONDS', 20, 1),
    coldKeys: COLD_KEYS,
    usageKeys: whole('BENCH_USAGE_KEYS', 100_000, 1),
    usageQueries: whole('BENCH_USAGE_QUERIES', 30, 1),
  }
}

/** The steps that can run alone (BENCH_ONLY); unset: the whole benchmark. */
const ONLY = ['usage-scale'] as const

function readOnly(): (typeof ONLY)[number] | null {
  const text = process.env['BENCH_ONLY']?.trim()
  if (text === undefined || text === '') return null
  const step = ONLY.find((name) => name === text)
  if (step === undefined) throw new Error(`BENCH_ONLY must be one of ${ONLY.join(', ')} (or unset for the whole benchmark), got ${JSON.stringify(text)}`)
  return step
}

/** BENCH_ONLY=usage-scale: the usage-at-scale step alone, on a temporary database of its own. */
async function usageScaleOnly(settings: Settings): Promise<void> {
  const startedAt = new Date().toISOString()
  const host = machine()
  const db = await temporaryDatabase()
  try {
    await migrate(db.url)
    const scale = await usageScale(db.url, settings.usageKeys, settings.usageQueries, progress)
    const dir = join(projectRoot, 'bench-results')
    mkdirSync(dir, { recursive: true })
    const file = `bench-results/${startedAt}-usage-scale.json`
    writeFileSync(
      join(projectRoot, file),
      `${JSON.stringify({ startedAt, finishedAt: new Date().toISOString(), machine: host, settings, usageScale: scale }, null, 2)}\n`,
    )
    process.stdout.write(usageScaleMarkdown(startedAt, host, scale, file))
  } finally {
    await db.drop().catch((error: unknown) => progress(`clean-up: dropping the database failed: ${String(error)}`))
  }
}

function progress(text: string): void {
  process.stderr.write(`bench: ${text}\n`)
}

/** What the run has started: every process is in `running`, to be stopped whatever happens. */
interface BenchRun {
  work: string
  notes: string[]
  running: Started[]
}

/** The targets every measurement names, and the setup that starts another gateway replica (the cold paths' warming one). */
interface Targets {
  all: Target[]
  bare: Target
  noChecks: Target
  gateway: Target
  /** The same gateway with USAGE=off: no usage counting, no request log. */
  usageOff: Target
  setup: GatewaySetup
}

async function main(): Promise<void> {
  const settings = readSettings()
  if (readOnly() === 'usage-scale') return usageScaleOnly(settings)
  const startedAt = new Date().toISOString()
  const host = machine()
  const generator = loadGenerator()
  progress(`load generator: ${generator.description}`)
  const redisUrl = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'
  const redis = await connectRedis(redisUrl)
  const redisPrefix = `sak-bench-${randomBytes(4).toString('hex')}:`
  const db = await temporaryDatabase()
  const run: BenchRun = { work: mkdtempSync(join(tmpdir(), 'sak-bench-')), notes: [], running: [] }
  if (generator.name === 'node' && process.env['BENCH_GENERATOR'] === undefined)
    run.notes.push(`wrk is not installed (apt-get install -y wrk): the load came from ${NODE_CLIENT}, which costs the machine far more per request.`)
  const pool = createPool(db.url, { max: 2, applicationName: 'bench' })
  try {
    await migrate(db.url)
    const tenant = await createTenant(pool)
    const warmKey = generateKey()
    await insertKeys(pool, tenant, [warmKey], 'bench warm key')
    const restrictedKey = generateKey()
    await insertKeys(pool, tenant, [restrictedKey], 'bench restricted key', ['agents:read', 'calls:write', 'contacts:read'])

    progress(`inserting ${settings.keys} keys into api_keys, then 2 000 lookups of unknown keys`)
    const million = await millionKeys(db.url, tenant, settings.keys)

    const setup = { databaseUrl: db.url, redisUrl, redisPrefix }
    const targets = await startTargets(run, setup, warmKey, restrictedKey)
    const measured = await measureTargets(settings, targets, () =>
      coldPaths(pool, tenant, targets.gateway, () => startGateway('warming replica', targets.setup)),
    )
    // Last: its seeding writes a gigabyte or so to Postgres, which the gateway's measurements should not share.
    const scale = await usageScale(db.url, settings.usageKeys, settings.usageQueries, progress)
    const finishedAt = new Date().toISOString()
    const report = buildReport({
      startedAt,
      finishedAt,
      machine: host,
      generator: { name: generator.name, description: generator.description },
      settings,
      notes: run.notes,
      million,
      ...measured,
      usageScale: scale,
    })
    const file = writeJson(report)
    process.stdout.write(markdown(report, file))
  } finally {
    // Each step of the clean-up is tried whatever happened before it, and never hides the run's own error.
    const attempt = (what: string, step: () => unknown): Promise<void> =>
      Promise.resolve()
        .then(step)
        .then(
          () => undefined,
          (error: unknown) => progress(`clean-up: ${what} failed: ${String(error)}`),
        )
    await attempt('stopping processes', () => Promise.all(run.running.map((child) => child.stop())))
    await attempt('closing the pool', () => pool.end())
    await attempt('removing the work directory', () => rmSync(run.work, { recursive: true, force: true }))
    await attempt('removing the Redis keys', () => clearPrefix(redis, redisPrefix))
    redis.disconnect()
    await attempt('dropping the database', () => db.drop())
  }
}

/** The upstream, the bare proxy, the no-check forwarder, nginx when installed, and the gateway, all started; in the order they are measured. */
async function startTargets(
  run: BenchRun,
  stores: Pick<GatewaySetup, 'databaseUrl' | 'redisUrl' | 'redisPrefix'>,
  warmKey: string,
  restrictedKey: string,
): Promise<Targets> {
  const { work, running } = run
  const tls = await certificate(work)
  const [upstreamPort, barePort, noChecksPort] = [await freePort(), await freePort(), await freePort()]
  const routesFile = join(work, 'routes.yaml')
  writeFileSync(routesFile, `routes:\n  - prefix: /v1/agents\n    scope: SUB-ACCOUNT\n    upstream: http://127.0.0.1:${upstreamPort}\n    permission: agents\n`)
  const upstream = await startNode('upstream', 'scripts/bench/upstream.ts', [String(upstreamPort)], {}, /upstream ready/)
  running.push(upstream)
  const proxyArguments = (port: number): string[] => [String(port), String(upstreamPort), tls.certFile, tls.keyFile]
  const bare = await startNode(BARE, 'scripts/bench/bare-proxy.ts', proxyArguments(barePort), {}, /bare proxy ready/)
  running.push(bare)
  const noChecks = await startNode(NO_CHECKS, 'scripts/bench/no-check-forwarder.ts', proxyArguments(noChecksPort), {}, /no-check forwarder ready/)
  running.push(noChecks)
  const setup: GatewaySetup = {
    ...stores,
    signingSecret: randomBytes(32).toString('hex'),
    routesFile,
    ...tls,
    logDir: work,
    // For the flood: a random X-Forwarded-For per request, believed from 127.0.0.1, and no throttle stop.
    env: { GATEWAY_AUTH_FAILURE_LIMIT: '1000000', GATEWAY_TRUSTED_PROXIES: '127.0.0.1' },
  }
  const gateway = await startGateway(GATEWAY, setup)
  running.push(gateway)
  const usageOff = await startGateway(GATEWAY_USAGE_OFF, { ...setup, env: { ...setup.env, USAGE: 'off' } })
  running.push(usageOff)

  const gatewayTarget: Target = {
    name: GATEWAY,
    origin: gateway.apiUrl,
    headers: { authorization: `Bearer ${warmKey}` },
    pid: gateway.pid,
    metricsUrl: gateway.metricsUrl,
  }
  const bareTarget: Target = { name: BARE, origin: `https://127.0.0.1:${barePort}`, headers: {}, pid: bare.pid }
  const noChecksTarget: Target = { name: NO_CHECKS, origin: `https://127.0.0.1:${noChecksPort}`, headers: {}, pid: noChecks.pid }
  const all: Target[] = [{ name: 'upstream alone', origin: `http://127.0.0.1:${upstreamPort}`, headers: {}, pid: upstream.pid }, bareTarget]
  const nginx = await startNginxTarget(run, upstreamPort, tls)
  if (nginx !== null) all.push(nginx)
  // The same gateway with a restricted key that may read the route: the permission check on every request.
  const restrictedTarget: Target = { ...gatewayTarget, name: GATEWAY_RESTRICTED, headers: { authorization: `Bearer ${restrictedKey}` } }
  all.push(noChecksTarget, gatewayTarget, restrictedTarget)
  const usageOffTarget: Target = { ...gatewayTarget, name: GATEWAY_USAGE_OFF, origin: usageOff.apiUrl, pid: usageOff.pid, metricsUrl: usageOff.metricsUrl }
  return { all, bare: bareTarget, noChecks: noChecksTarget, gateway: gatewayTarget, usageOff: usageOffTarget, setup }
}

/** nginx as a reference when it is installed and starts; otherwise a note says why its row is missing. */
async function startNginxTarget(run: BenchRun, upstreamPort: number, tls: Certificate): Promise<Target | null> {
  const nginxBinary = findNginx()
  if (nginxBinary === null) {
    run.notes.push('nginx is not installed (apt-get install -y nginx): its row is skipped.')
    return null
  }
  const nginxPort = await freePort()
  const nginx = await startNginx(nginxBinary, join(run.work, 'nginx'), nginxPort, upstreamPort, tls).catch((error: unknown) => {
    run.notes.push(`nginx (${nginxBinary}) did not start, its row is skipped: ${error instanceof Error ? error.message : String(error)}`)
    return null
  })
  if (nginx === null) return null
  run.running.push(nginx)
  return { name: 'nginx', origin: `https://127.0.0.1:${nginxPort}`, headers: {}, pid: nginx.pid }
}

/** Every measurement after the million keys, in order; `cold` measures the cold paths (it starts a replica of its own). */
async function measureTargets(settings: Settings, targets: Targets, cold: () => ReturnType<typeof coldPaths>) {
  const { all, bare, noChecks, gateway, usageOff } = targets
  progress(`warming up ${all.map((t) => t.name).join(', ')}`)
  await warmUp(all, Math.min(2, settings.seconds), settings.connections)
  progress(`${settings.rounds} rounds × ${all.length} targets × ${settings.seconds} s, ${settings.connections} connections`)
  const rounds = await runRounds(all, settings.rounds, settings.seconds, settings.connections, (sample) =>
    progress(
      `round ${sample.round} ${sample.target.padEnd(14)} ${sample.load.perSecond.toFixed(0).padStart(6)} req/s  p99 ${sample.load.p99Ms.toFixed(2)} ms  ${JSON.stringify(sample.load.statuses)}`,
    ),
  )

  progress(`paired at saturation: ${BARE} and ${GATEWAY} in turn, ${SLICE_MS} ms at a time, ${settings.pairedSeconds} s each`)
  const pairedRun = await paired(bare, gateway, settings.pairedSeconds, settings.connections)
  progress(
    `paired: ${pairedRun.targets.map((t) => `${t.name} ${t.perSecond.toFixed(0)} req/s p99 ${t.p99Ms.toFixed(2)} ms`).join(', ')}; throughput ratio ${pairedRun.throughputRatio.toFixed(2)}`,
  )

  progress(`paired at saturation, the ceiling: ${BARE} and ${NO_CHECKS} in turn, ${SLICE_MS} ms at a time, ${settings.pairedSeconds} s each`)
  const ceiling = await paired(bare, noChecks, settings.pairedSeconds, settings.connections)
  progress(`ceiling: throughput ratio ${ceiling.throughputRatio.toFixed(2)}`)

  progress(`paired at saturation, usage: ${GATEWAY_USAGE_OFF} and ${GATEWAY} in turn, ${SLICE_MS} ms at a time, ${settings.pairedSeconds} s each`)
  await warmUp([usageOff], Math.min(2, settings.seconds), settings.connections)
  const usage = await paired(usageOff, gateway, settings.pairedSeconds, settings.connections)
  progress(`usage: throughput ratio ${usage.throughputRatio.toFixed(2)}`)

  progress(`side by side: ${settings.sideWindows} windows of the same load on ${BARE}, ${NO_CHECKS} and ${GATEWAY} at once`)
  const side = await sideBySide([bare, noChecks, gateway], settings.sideWindows, sideRate(pairedRun), progress)

  progress(`cold paths: ${COLD_KEYS} Redis-only keys (warmed by a second replica) and ${COLD_KEYS} Postgres-only keys`)
  const coldRun = await cold()

  progress(`soak: ${settings.soakSeconds} s at full load, after ${SOAK_WARM_UP_SECONDS} s of it`)
  const soaked = await soak(gateway, settings.soakSeconds, settings.connections)

  progress(`flood: ${settings.floodKeys} distinct unknown keys over ${settings.floodConnections} connections`)
  const flooded = await flood(gateway, settings.floodKeys, settings.floodConnections)
  return { rounds, paired: pairedRun, ceiling, usage, side, cold: coldRun, soak: soaked, flood: flooded }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)
