/**
 * `npm start`: the whole stack on one machine. Embedded Postgres when
 * DATABASE_URL is unset, a signing secret made for this run when
 * TENANT_SIGNING_SECRET is unset, migrations applied once before the
 * services start, then agency-service, resource-service and the gateway as
 * child processes. Ctrl-C (or SIGTERM) stops them all cleanly.
 */
import { randomBytes } from 'node:crypto'
import { createWriteStream, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { readDatabaseUrl, readPort, readRedisUrl, readSecret, runMain } from '@scoped/shared/config'
import { migrate } from '@scoped/shared/migrate'
import { startEmbeddedPostgres } from './embedded-postgres.js'
import type { EmbeddedPostgres } from './embedded-postgres.js'
import { projectRoot } from '../test/helpers/processes.js'
import { spawnUntilReady } from '../test/helpers/spawn.js'
import type { Spawned } from '../test/helpers/spawn.js'

const dataRoot = join(projectRoot, '.data')
const logDir = join(dataRoot, 'logs')

interface Service {
  name: string
  entry: string
  ready: RegExp
}

const services: Service[] = [
  { name: 'agency-service', entry: 'agency-service/src/main.ts', ready: /agency-service ready/ },
  { name: 'resource-service', entry: 'resource-service/src/main.ts', ready: /resource-service ready/ },
  { name: 'gateway', entry: 'gateway/src/main.ts', ready: /gateway ready/ },
]

function say(line = ''): void {
  process.stdout.write(`${line}\n`)
}

/** Starts a service, its log going to .data/logs/<name>.log; resolves when it reports ready. */
async function startService(service: Service, env: NodeJS.ProcessEnv): Promise<Spawned> {
  const log = createWriteStream(join(logDir, `${service.name}.log`), { flags: 'a' })
  try {
    return await spawnUntilReady({
      name: service.name,
      command: process.execPath,
      args: [...process.execArgv, service.entry],
      env,
      cwd: projectRoot,
      ready: service.ready,
      timeoutMs: 60_000,
      keepOutput: 64 * 1024,
      log,
      // A Ctrl-C in the terminal reaches only this process, which then stops the services in order.
      detached: true,
    })
  } catch (error) {
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n(the whole log: .data/logs/${service.name}.log)`, { cause: error })
  }
}

async function main(): Promise<void> {
  const env = process.env
  const database = readDatabaseUrl(env)
  const redisUrl = readRedisUrl(env)
  const gatewayPort = readPort(env, 'GATEWAY_PORT', 8443)
  const httpPort = readPort(env, 'GATEWAY_HTTP_PORT', 8080)
  const adminPort = readPort(env, 'GATEWAY_ADMIN_PORT', 9090)
  const secret = readSecret(env, 'TENANT_SIGNING_SECRET') ?? randomBytes(32).toString('base64url')
  mkdirSync(logDir, { recursive: true })

  let embedded: EmbeddedPostgres | undefined
  const children: Spawned[] = []
  let stopping = false
  const stop = async (code: number): Promise<void> => {
    if (stopping) return
    stopping = true
    say('\nstopping…')
    // The gateway first, so no request reaches a backend that is going away.
    for (const child of [...children].reverse()) await child.stop('SIGTERM', 15_000)
    await embedded?.stop()
    process.exit(code)
  }
  // Should this process die another way, take the services with it.
  process.on('exit', () => children.forEach((child) => child.child.kill('SIGKILL')))
  process.on('SIGINT', () => void stop(0))
  process.on('SIGTERM', () => void stop(0))

  if (database.embedded) {
    say('starting embedded Postgres (.data/pglite)…')
    embedded = await startEmbeddedPostgres(dataRoot)
  }
  const databaseUrl = embedded?.url ?? database.url
  const applied = await migrate(databaseUrl)
  if (applied.length > 0) say(`applied migrations: ${applied.join(', ')}`)

  const childEnvironment: NodeJS.ProcessEnv = { ...env, DATABASE_URL: databaseUrl, TENANT_SIGNING_SECRET: secret }
  for (const service of services) {
    try {
      const child = await startService(service, childEnvironment)
      children.push(child)
      void child.exited.then((code) => {
        if (stopping) return
        process.stderr.write(`${service.name} exited unexpectedly (status ${code}); see .data/logs/${service.name}.log\n`)
        void stop(1)
      })
    } catch (error) {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`)
      await stop(1)
      return
    }
  }

  const webhooksPrivate = env['WEBHOOK_ALLOW_PRIVATE_ADDRESSES']?.trim() === '1'
  printWelcome({
    embedded: database.embedded,
    databaseUrl,
    redis: redisUrl !== undefined && redisUrl !== '',
    gatewayPort,
    httpPort,
    adminPort,
    webhooksPrivate,
  })
}

/** Where everything is, and the ctl commands of a first agency, sub-account and key. */
function printWelcome(stack: {
  embedded: boolean
  databaseUrl: string
  redis: boolean
  gatewayPort: number
  httpPort: number
  adminPort: number
  webhooksPrivate: boolean
}): void {
  const { gatewayPort, httpPort, adminPort } = stack
  const ctl = stack.embedded ? 'npm run --silent ctl --' : 'DATABASE_URL=… npm run --silent ctl --'
  say('')
  say('The stack is running.')
  say(`  API (HTTPS)        https://localhost:${gatewayPort}/v1/…   (development certificate: curl -k, or --cacert .data/dev-tls/cert.pem)`)
  say(`  API reference      https://localhost:${gatewayPort}/docs   (OpenAPI 3.1: /openapi.json)`)
  say(`  console            https://localhost:${gatewayPort}/console/`)
  say(`  plain HTTP         http://localhost:${httpPort}   (rejects every request)`)
  say(`  operations         http://127.0.0.1:${adminPort}/healthz  /readyz  /metrics`)
  say(`  gateway → backends plain HTTP on loopback (127.0.0.1 only); the compose and Kubernetes deployments use mutual TLS`)
  say(`  database           ${stack.embedded ? `embedded Postgres, ${stack.databaseUrl}` : 'DATABASE_URL'}`)
  say(`  cache              ${stack.redis ? 'Redis (REDIS_URL)' : 'none (one gateway replica; set REDIS_URL for more)'}`)
  say(
    `  webhooks           ${stack.webhooksPrivate ? 'WEBHOOK_ALLOW_PRIVATE_ADDRESSES=1: http:// and private addresses allowed (development only)' : 'https:// to public addresses only'}`,
  )
  say(`  logs               .data/logs/`)
  say('')
  say('A first agency, sub-account and keys (ctl prints JSON: the key is its "key", shown this once):')
  say(`  ${ctl} agency create --name "Acme"                         # note its "id" as A`)
  say(`  ${ctl} sub-account create --agency A --name "Acme West"    # note its "id" as S`)
  say(`  ${ctl} key create --sub-account S --name "first key"       # SUB-ACCOUNT: /v1/agents, /v1/contacts, /v1/calls`)
  say(`  ${ctl} key create --agency A --name "agency key"           # AGENCY: /v1/agency, /v1/agency/sub-accounts`)
  say(`  curl --cacert .data/dev-tls/cert.pem -H "Authorization: Bearer <key>" https://localhost:${gatewayPort}/v1/agents`)
  say('')
  say('Ctrl-C stops everything.')
}

runMain('npm start', main)
