/**
 * A low-rate soak of a running stack (`npm start`, or any gateway with its
 * database): what a newcomer does, for as long as asked. Each round makes a
 * new sub-account key with `ctl`, uses it at once from several clients
 * together (its first uses: the key is in no cache yet), uses a few older
 * keys again, lists the keys with `ctl` beside them, and reads /readyz. Any
 * answer but 200 is printed when it happens; the summary goes to stdout as
 * JSON, and the exit status is 1 when anything failed.
 *
 *   npm run --silent soak                          # an hour against `npm start`
 *   SOAK_SECONDS=300 npm run --silent soak         # five minutes
 *
 * Not part of the test suite (docs/operations.md, "Soaking the quick start").
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { Agent, request } from 'undici'
import { projectRoot, runCtl } from '../test/helpers/processes.js'
import type { ProcessEnv } from '../test/helpers/processes.js'

interface SoakOptions {
  api: string
  admin: string
  ca: string | undefined
  seconds: number
  intervalMs: number
  clients: number
  /** Passed to ctl: DATABASE_URL when the stack is not the embedded one. */
  ctlEnv: ProcessEnv
}

function positive(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name]
  if (raw === undefined || raw === '') return fallback
  const value = Number(raw)
  if (!Number.isInteger(value) || value <= 0) throw new Error(`${name} must be a positive integer, got ${JSON.stringify(raw)}`)
  return value
}

function readOptions(env: NodeJS.ProcessEnv): SoakOptions {
  const caFile = env['SOAK_CA_FILE'] ?? join(projectRoot, '.data/dev-tls/cert.pem')
  return {
    api: env['SOAK_API'] ?? 'https://localhost:8443',
    admin: env['SOAK_ADMIN'] ?? 'http://127.0.0.1:9090',
    ca: caFile === '' ? undefined : readFileSync(caFile, 'utf8'),
    seconds: positive(env, 'SOAK_SECONDS', 3600),
    intervalMs: positive(env, 'SOAK_INTERVAL_MS', 2000),
    clients: positive(env, 'SOAK_CLIENTS', 4),
    ctlEnv: env['DATABASE_URL'] === undefined ? {} : { DATABASE_URL: env['DATABASE_URL'] },
  }
}

interface MadeKey {
  id: string
  key: string
}

interface Tally {
  rounds: number
  keysMade: number
  requests: number
  byStatus: Record<string, number>
  failures: string[]
  notReady: number
  ctlFailures: number
}

function note(tally: Tally, line: string): void {
  tally.failures.push(line)
  process.stderr.write(`${new Date().toISOString()} ${line}\n`)
}

async function ctl(options: SoakOptions, tally: Tally, args: string[]): Promise<Record<string, string> | undefined> {
  const result = await runCtl(args, options.ctlEnv)
  if (result.status === 0) return result.json as Record<string, string>
  tally.ctlFailures++
  note(tally, `ctl ${args.slice(0, 2).join(' ')} failed: ${result.stderr.trim()}`)
  return undefined
}

async function use(options: SoakOptions, agent: Agent, tally: Tally, key: string, what: string): Promise<void> {
  tally.requests++
  try {
    const response = await request(`${options.api}/v1/agents?limit=1`, { headers: { authorization: `Bearer ${key}` }, dispatcher: agent })
    const text = await response.body.text()
    tally.byStatus[response.statusCode] = (tally.byStatus[response.statusCode] ?? 0) + 1
    if (response.statusCode !== 200) note(tally, `${what}: ${response.statusCode} ${text} (retry-after: ${String(response.headers['retry-after'])})`)
  } catch (error) {
    tally.byStatus['error'] = (tally.byStatus['error'] ?? 0) + 1
    note(tally, `${what}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

async function readiness(options: SoakOptions, tally: Tally): Promise<void> {
  try {
    const response = await request(`${options.admin}/readyz`)
    const text = await response.body.text()
    if (response.statusCode !== 200) {
      tally.notReady++
      note(tally, `/readyz ${response.statusCode} ${text}`)
    }
  } catch (error) {
    tally.notReady++
    note(tally, `/readyz: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/** One round: a new key's first uses from every client at once, older keys again, ctl listing beside them. */
async function round(options: SoakOptions, agent: Agent, tally: Tally, subAccount: string, keys: MadeKey[]): Promise<void> {
  tally.rounds++
  const made = await ctl(options, tally, ['key', 'create', '--sub-account', subAccount, '--name', `soak ${tally.rounds}`])
  if (made?.['key'] !== undefined && made['id'] !== undefined) {
    tally.keysMade++
    keys.push({ id: made['id'], key: made['key'] })
  }
  // A sub-account holds 25 active keys at most: the oldest the soak made is revoked, beside the rest.
  const retired = keys.length > 20 ? keys.shift() : undefined
  const newest = keys.at(-1)?.key
  const older = keys
    .slice(0, -1)
    .slice(-3)
    .map((made) => made.key)
  await Promise.all([
    ...(retired === undefined ? [] : [ctl(options, tally, ['key', 'revoke', retired.id])]),
    ...(newest === undefined
      ? []
      : Array.from({ length: options.clients }, (_, i) => use(options, agent, tally, newest, `round ${tally.rounds}, first use ${i + 1}`))),
    ...older.map((key, i) => use(options, agent, tally, key, `round ${tally.rounds}, older key ${i + 1}`)),
    ctl(options, tally, ['key', 'list', '--sub-account', subAccount]),
    readiness(options, tally),
  ])
}

async function main(): Promise<void> {
  const options = readOptions(process.env)
  const agent = new Agent(options.ca === undefined ? {} : { connect: { ca: options.ca } })
  const tally: Tally = { rounds: 0, keysMade: 0, requests: 0, byStatus: {}, failures: [], notReady: 0, ctlFailures: 0 }
  const agency = await ctl(options, tally, ['agency', 'create', '--name', `Soak ${new Date().toISOString()}`])
  const sub = agency && (await ctl(options, tally, ['sub-account', 'create', '--agency', agency['id']!, '--name', 'Soak']))
  if (sub === undefined) throw new Error('could not make the soak’s agency and sub-account with ctl')
  const keys: MadeKey[] = []
  const end = Date.now() + options.seconds * 1000
  const started = Date.now()
  while (Date.now() < end) {
    const roundStart = Date.now()
    await round(options, agent, tally, sub['id']!, keys)
    if (tally.rounds % 30 === 0)
      process.stderr.write(`${new Date().toISOString()} ${tally.rounds} rounds, ${tally.requests} requests, ${tally.failures.length} failures\n`)
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, options.intervalMs - (Date.now() - roundStart))))
  }
  await agent.close()
  const { failures, ...counts } = tally
  process.stdout.write(`${JSON.stringify({ seconds: Math.round((Date.now() - started) / 1000), ...counts, failures: failures.slice(0, 50) }, null, 2)}\n`)
  process.exitCode = failures.length === 0 ? 0 : 1
}

main().catch((error: unknown) => {
  process.stderr.write(`soak: ${error instanceof Error ? error.message : String(error)}\n`)
  process.exitCode = 1
})
