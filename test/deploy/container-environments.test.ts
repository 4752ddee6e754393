/**
 * Every container of deploy/compose.yaml and of the Kubernetes base is given
 * exactly the environment variables its process reads: no more (a secret in
 * a container that never reads it is a secret for whoever takes that
 * container), and none its process needs missing.
 *
 * What a process reads is derived, not listed: each service's own
 * configuration reader runs against the environment the deployment gives it,
 * through a proxy that records every name asked for, with the files its
 * mounts hold made in a scratch directory (its certificates, its route map).
 * The reader must accept that environment (so nothing required is missing)
 * and must have asked for every variable given (so nothing is extra). Postgres
 * and Redis are checked against what their own command and init script read.
 * Docker and a cluster are not needed; neither is run here.
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import t from 'tap'
import type { Test } from 'tap'
import type { Env } from '@scoped/shared/config'
import { EMBEDDED_DATABASE_URL, readDatabaseUrl } from '@scoped/shared/config'
import { readGatewayConfig } from '@scoped/gateway/config'
import { makeInternalCertificates, parseLeaf } from '@scoped/gateway/internal-certificates'
import { readAgencyServiceConfig } from '@scoped/agency-service/config'
import { run } from '@scoped/agency-service/ctl/commands'
import { parse } from '@scoped/agency-service/ctl/flags'
import { readResourceServiceConfig } from '@scoped/resource-service/config'
import { createTestDatabase } from '../helpers/database.js'
import type { Deployment, EnvVar, Job } from './deploy-files.js'
import { isManifest, parseYamlDocument, parseYamlDocuments, readProjectFile } from './deploy-files.js'

const CONTAINER_ROOT = '/etc/scoped-api/'
const scratch = t.testdir({})
const internal = join(scratch, 'internal')
await makeInternalCertificates(internal, ['server:agency-service', 'server:resource-service', 'client:gateway', 'server:gateway-api'].map(parseLeaf))
const db = await createTestDatabase(t)

/** An environment that records the name of every variable a reader asks for; a reader that lists them all could not be checked, and fails. */
function recording(values: Record<string, string>): { env: Env; read: Set<string> } {
  const read = new Set<string>()
  const env = new Proxy(values as Env, {
    get: (target, name) => {
      if (typeof name === 'string') read.add(name)
      return typeof name === 'string' ? target[name] : undefined
    },
    has: (target, name) => {
      if (typeof name === 'string') read.add(name)
      return name in target
    },
    ownKeys: () => {
      throw new Error('a configuration reader enumerated the environment')
    },
  })
  return { env, read }
}

/**
 * The container's files under /etc/scoped-api, made in a directory of its own: its internal-hop certificates,
 * a listener certificate, and the route map the deployment mounts (its paths moved into the same directory).
 */
function containerFiles(service: string, routes: { containerPath: string; source: string } | undefined): (value: string) => string {
  const root = join(scratch, 'containers', `${service}-${randomBytes(4).toString('hex')}`)
  const place = (containerPath: string, text: string): void => {
    const file = join(root, containerPath)
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, text)
  }
  const relocate = (value: string): string => value.replaceAll(CONTAINER_ROOT, join(root, CONTAINER_ROOT))
  const own = ['agency-service', 'resource-service'].includes(service) ? service : 'gateway'
  for (const name of ['tls.crt', 'tls.key', 'ca.crt']) place(`${CONTAINER_ROOT}internal-tls/${name}`, readFileSync(join(internal, own, name), 'utf8'))
  for (const name of ['tls.crt', 'tls.key']) place(`${CONTAINER_ROOT}tls/${name}`, readFileSync(join(internal, 'gateway-api', name), 'utf8'))
  if (routes !== undefined) place(routes.containerPath, relocate(readProjectFile(routes.source)))
  return relocate
}

/** A plausible value for a variable the deployment takes from a secret. */
function secretValue(name: string): string {
  if (name.includes('DATABASE_URL')) return `postgresql://someone:${randomBytes(8).toString('hex')}@postgres:5432/scoped`
  if (name.includes('REDIS_URL')) return `redis://scoped:${randomBytes(8).toString('hex')}@redis:6379`
  return randomBytes(32).toString('hex')
}

type Reader = (t: Test, env: Env) => Promise<unknown>

/** Each process's reader, and what its configuration must show for a deployment: TLS inside, its own database, Redis where shared. */
const readers: Record<string, Reader> = {
  gateway: async (t, env) => {
    const config = readGatewayConfig(env)
    t.not(config.databaseUrl, EMBEDDED_DATABASE_URL, 'the gateway has its database')
    return config
    t.ok(config.redis, 'the gateway shares its cache through Redis')
    for (const route of config.routes.routes) {
      t.match(route.upstream, /^https:/, `${route.prefix}: an https upstream`)
      t.ok(
        route.tls?.ca !== undefined && route.tls?.cert !== undefined && route.tls?.key !== undefined,
        `${route.prefix}: the internal CA and the gateway's client certificate`,
      )
    }
  },
  'agency-service': async (t, env) => {
    const config = readAgencyServiceConfig(env)
    t.not(config.databaseUrl, EMBEDDED_DATABASE_URL)
    t.ok(config.tls?.clientCa, 'agency-service listens with mutual TLS')
    t.ok(config.healthPort, 'with a health listener for the probes')
    t.ok(config.keyCacheSecret, 'agency-service seals what it writes to the cache')
    return config
  },
  'resource-service': async (t, env) => {
    const config = readResourceServiceConfig(env)
    t.not(config.databaseUrl, EMBEDDED_DATABASE_URL)
    t.ok(config.tls?.clientCa, 'resource-service listens with mutual TLS')
    t.ok(config.healthPort, 'with a health listener for the probes')
    return config
  },
  // The migration job is `ctl migrate`: ctl.ts reads the database URL, then runs the command (against a real database here).
  migrate: async (_t, env) => {
    const database = readDatabaseUrl(env)
    if (database.url === db.url) {
      const { words, flags } = parse(['migrate'])
      await run(db.pool, env, words, flags)
    }
    return database
  },
  // The certificate job takes its directories as arguments and reads no variable.
  certs: async () => undefined,
}

/**
 * Runs the reader of `process` over `given` (names with values) and says which given names it never read; then,
 * for each secret given, whether the configuration changes with its value: one that a fallback reads but another
 * variable overrides (the master signing secret beside a backend's own) is held for nothing.
 */
async function check(
  t: Test,
  label: string,
  process: string,
  given: Record<string, string>,
  relocate: (value: string) => string,
  optional: readonly string[] = [],
  secrets: readonly string[] = [],
): Promise<void> {
  const reader = readers[process]
  if (reader === undefined) throw new Error(`no reader for ${process}`)
  const values = Object.fromEntries(Object.entries(given).map(([name, value]) => [name, relocate(value)]))
  if (process === 'migrate') values['DATABASE_URL'] = db.url
  // A rotation's previous secret is given a value (as during a rotation), so that its use can be seen.
  for (const name of [...optional, ...Object.keys(values).filter((name) => values[name] === '' && secrets.includes(name))]) values[name] = secretValue(name)
  const { env, read } = recording(values)
  await t.resolves(reader(t, env), `${label}: its reader accepts the environment it is given`)
  t.same(
    [...Object.keys(given), ...optional].filter((name) => !read.has(name)),
    [],
    `${label}: given no variable its process does not read`,
  )
  const quiet = { ok: () => true, not: () => true, match: () => true } as unknown as Test
  const baseline = await reader(quiet, recording(values).env)
  const ignored: string[] = []
  for (const name of secrets.filter((secret) => secret in values && !(process === 'migrate' && secret === 'DATABASE_URL'))) {
    const changed = await reader(quiet, recording({ ...values, [name]: secretValue(name) }).env)
    if (isDeepStrictEqual(changed, baseline)) ignored.push(name)
  }
  t.same(ignored, [], `${label}: every secret it holds is one its configuration uses`)
}

// --- docker compose ---------------------------------------------------------------------------------------------

interface ComposeService {
  image?: string
  command?: string[] | string
  environment?: Record<string, string | number | null>
  env_file?: unknown
  volumes?: Array<string | { target: string }>
  healthcheck?: { test?: string[] | string }
}
const compose = parseYamlDocument(readProjectFile('deploy/compose.yaml'), 'deploy/compose.yaml') as { services: Record<string, ComposeService> }

/** compose's `${NAME}`, `${NAME:?message}` and `${NAME:-}`: the value deploy/.env would give (empty for `:-`). */
function isComposeSecret(value: string | number | null): boolean {
  return /^\$\{/.test(String(value ?? ''))
}

function composeValue(name: string, value: string | number | null): string {
  const interpolated = /^\$\{([A-Z0-9_]+)(:\?[^}]*|:-)?\}$/.exec(String(value ?? ''))
  if (interpolated === null) return String(value ?? '')
  return interpolated[2] === ':-' ? '' : secretValue(interpolated[1]!)
}

t.test('compose: no container reads the whole deploy/.env', async (t) => {
  for (const [name, service] of Object.entries(compose.services)) t.equal(service.env_file, undefined, `${name}: no env_file`)
})

for (const [name, service] of Object.entries(compose.services)) {
  if (service.image !== 'scoped-api:local') continue
  t.test(`compose ${name}: exactly the variables its process reads`, async (t) => {
    const given = Object.fromEntries(Object.entries(service.environment ?? {}).map(([variable, value]) => [variable, composeValue(variable, value)]))
    const routesMount = (service.volumes ?? []).find((volume): volume is string => typeof volume === 'string' && volume.startsWith('./routes'))
    const routes =
      routesMount === undefined ? undefined : { containerPath: routesMount.split(':')[1]!, source: `deploy/${routesMount.split(':')[0]!.slice(2)}` }
    const process = [service.command]
      .flat()
      .find((word) => word?.includes('/dist/'))
      ?.match(/^([a-z-]+)\/dist\/(main|ctl|internal-certificates)\.js$/)
    const which = process?.[2] === 'main' ? process[1]! : process?.[2] === 'ctl' ? 'migrate' : 'certs'
    const secrets = Object.entries(service.environment ?? {}).flatMap(([variable, value]) => (isComposeSecret(value) ? [variable] : []))
    await check(t, `compose ${name}`, which, given, containerFiles(name, routes), [], secrets)
  })
}

t.test('compose postgres and redis: only the variables their own command and init script read', async (t) => {
  // The postgres image reads these three (its documented variables); postgres-init.sql reads the logins' passwords.
  const init = readProjectFile('deploy/postgres-init.sql')
  const postgresReads = ['POSTGRES_USER', 'POSTGRES_DB', 'POSTGRES_PASSWORD', ...[...init.matchAll(/^\\getenv \S+ ([A-Z_]+)$/gm)].map((m) => m[1]!)]
  t.same(Object.keys(compose.services['postgres']?.environment ?? {}).sort(), [...postgresReads].sort(), 'postgres')
  const redis = compose.services['redis']!
  const redisText = JSON.stringify([redis.command, redis.healthcheck?.test])
  const redisReads = [...new Set([...redisText.matchAll(/\$\$([A-Z_]+)/g)].map((m) => m[1]!))]
  t.same(Object.keys(redis.environment ?? {}).sort(), redisReads.sort(), 'redis')
  for (const name of ['postgres', 'redis']) {
    t.notOk(
      Object.keys(compose.services[name]?.environment ?? {}).some((variable) => /SIGNING|KEY_CACHE|DATABASE_URL|REDIS_URL/.test(variable)),
      `${name} holds no service secret`,
    )
  }
})

// --- Kubernetes ---------------------------------------------------------------------------------------------------

const workloads = ['gateway-deployment.yaml', 'agency-service-deployment.yaml', 'resource-service-deployment.yaml', 'migrate-job.yaml'].map((file) => {
  const found = parseYamlDocuments(readProjectFile(`deploy/kubernetes/${file}`), file).filter(isManifest)[0] as Deployment | Job | undefined
  if (found === undefined) throw new Error(`no workload in ${file}`)
  return found
})

function kubernetesValue(variable: EnvVar): string | undefined {
  if (variable.value !== undefined) return variable.value
  const ref = variable.valueFrom?.secretKeyRef
  if (ref === undefined) throw new Error(`${variable.name}: neither a value nor a Secret`)
  // An optional key (a rotation's previous secret) is absent outside a rotation; it is checked as given all the same.
  return ref.optional === true ? undefined : secretValue(variable.name)
}

for (const workload of workloads) {
  const name = workload.metadata.name
  t.test(`Kubernetes ${workload.kind} ${name}: exactly the variables its process reads`, async (t) => {
    for (const container of workload.spec.template.spec.containers) {
      t.equal(container.envFrom, undefined, `${container.name}: no envFrom (it would hand over a whole Secret)`)
      const variables = container.env ?? []
      const present = Object.fromEntries(variables.flatMap((v) => (kubernetesValue(v) === undefined ? [] : [[v.name, kubernetesValue(v)!]])))
      const routesMount = container.volumeMounts?.find((mount) => mount.name === 'routes')
      const routes = routesMount === undefined ? undefined : { containerPath: `${routesMount.mountPath}/routes.yaml`, source: 'deploy/kubernetes/routes.yaml' }
      // The optional ones (a rotation's previous secret) are absent, and must be read all the same.
      const optional = variables.filter((v) => kubernetesValue(v) === undefined).map((v) => v.name)
      const secrets = variables.filter((v) => v.valueFrom?.secretKeyRef !== undefined).map((v) => v.name)
      await check(t, name, workload.kind === 'Job' ? 'migrate' : name, present, containerFiles(name, routes), optional, secrets)
    }
  })
}

t.test('only the migration job has the owner’s database URL', async (t) => {
  for (const workload of workloads) {
    const refs = workload.spec.template.spec.containers.flatMap((c) => c.env ?? []).map((v) => v.valueFrom?.secretKeyRef?.key)
    t.equal(refs.includes('database-url'), workload.metadata.name === 'migrate', `${workload.metadata.name}`)
  }
  for (const [name, service] of Object.entries(compose.services)) {
    const owner = Object.values(service.environment ?? {}).some((value) => /^\$\{DATABASE_URL[:}]/.test(String(value)))
    t.equal(owner, name === 'migrate', `compose ${name}`)
  }
})
