/**
 * Invariants of deploy/compose.yaml and its env file, checked by parsing (no
 * Docker needed): two gateway replicas behind a one-shot migration job,
 * secrets only from deploy/.env, health checks on the ports the processes
 * listen on, and a route map whose upstreams are the compose services.
 */
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { parseRouteMap } from '@scoped/gateway/route-map'
import { parseYamlDocument, readProjectFile } from './deploy-files.js'
import { projectRoot } from '../helpers/processes.js'
import { rawRoutes, routeLimits, routeShapes, withoutTlsFiles } from './route-files.js'

interface ComposeService {
  image?: string
  build?: unknown
  command?: string[]
  environment?: Record<string, string | number | null> | string[]
  env_file?: Array<string | { path: string }> | string
  depends_on?: Record<string, { condition: string }> | string[]
  healthcheck?: { test?: string[] | string }
  deploy?: { replicas?: number }
  ports?: string[]
  volumes?: string[]
  restart?: string
  user?: string
  privileged?: boolean
  cap_drop?: string[]
  security_opt?: string[]
}

const compose = parseYamlDocument(readProjectFile('deploy/compose.yaml'), 'deploy/compose.yaml') as {
  services: Record<string, ComposeService>
}
const services = compose.services

function service(name: string): ComposeService {
  const found = services[name]
  if (found === undefined) throw new Error(`compose has no service ${name}`)
  return found
}

function environment(entry: ComposeService): Record<string, string> {
  const env = entry.environment ?? {}
  if (Array.isArray(env)) {
    return Object.fromEntries(env.map((line) => [line.split('=')[0] ?? '', line.slice(line.indexOf('=') + 1)]))
  }
  return Object.fromEntries(Object.entries(env).map(([name, value]) => [name, value === null ? '' : String(value)]))
}

function envFiles(entry: ComposeService): string[] {
  const files = entry.env_file === undefined ? [] : Array.isArray(entry.env_file) ? entry.env_file : [entry.env_file]
  return files.map((file) => (typeof file === 'string' ? file : file.path))
}

const appServices = ['certs', 'migrate', 'agency-service', 'resource-service', 'gateway']
/** Each long-running service: the port it serves on, its host variable, and the port its health check probes. */
const longRunning: Array<[string, string, string, string]> = [
  ['agency-service', 'AGENCY_SERVICE_PORT', 'AGENCY_SERVICE_HOST', 'AGENCY_SERVICE_HEALTH_PORT'],
  ['resource-service', 'RESOURCE_SERVICE_PORT', 'RESOURCE_SERVICE_HOST', 'RESOURCE_SERVICE_HEALTH_PORT'],
  ['gateway', 'GATEWAY_ADMIN_PORT', 'GATEWAY_ADMIN_HOST', 'GATEWAY_ADMIN_PORT'],
]

/** The variables compose.yaml itself sets; parsed from deploy/.env.example. */
const envExample = new Map(
  readProjectFile('deploy/.env.example')
    .split('\n')
    .filter((line) => /^[A-Z_]+=/.test(line))
    .map((line): [string, string] => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
)

t.test('the stack: Postgres, Redis, migrations, both backends, the gateway', async (t) => {
  t.same(Object.keys(services).sort(), ['agency-service', 'certs', 'gateway', 'migrate', 'postgres', 'redis', 'resource-service'])
  const images = new Set(appServices.map((name) => service(name).image))
  t.equal(images.size, 1, 'one image for every process')
})

t.test('two gateway replicas, each with its own host ports', async (t) => {
  const gateway = service('gateway')
  t.equal(gateway.deploy?.replicas, 2)
  t.ok((gateway.ports ?? []).length > 0, 'the API is published')
  for (const port of gateway.ports ?? []) {
    const match = /^(\d+)-(\d+):\d+$/.exec(port)
    t.ok(match, `${port} publishes a range of host ports`)
    if (match !== null) t.equal(Number(match[2]) - Number(match[1]) + 1, 2, `${port}: one host port per replica`)
  }
  t.match(
    envExample.get('REDIS_URL') === '' ? readProjectFile('deploy/.env.example') : '',
    /redis:\/\/scoped:<REDIS_PASSWORD>@redis:6379/,
    'replicas share the cache and the revocation channel, as the ACL user',
  )
})

t.test('migrations run once, as a job every service waits for', async (t) => {
  const migrate = service('migrate')
  t.same(migrate.command, ['node', 'agency-service/dist/ctl.js', 'migrate'])
  t.equal(migrate.restart, 'no', 'a one-shot job')
  t.same(migrate.depends_on, { postgres: { condition: 'service_healthy' } })
  for (const name of ['agency-service', 'resource-service', 'gateway']) {
    const dependencies = service(name).depends_on
    t.notOk(Array.isArray(dependencies), `${name}: depends_on with conditions`)
    if (!Array.isArray(dependencies)) {
      t.equal(dependencies?.migrate?.condition, 'service_completed_successfully', `${name} waits for the migrations`)
      t.equal(dependencies?.postgres?.condition, 'service_healthy', `${name} waits for Postgres`)
    }
  }
})

t.test('every process runs a compiled entry point that has a source file', async (t) => {
  for (const name of appServices) {
    const [node, entry] = service(name).command ?? []
    t.equal(node, 'node', `${name} runs node`)
    const source = entry?.replace(/^([a-z-]+)\/dist\/(.+)\.js$/, '$1/src/$2.ts')
    t.ok(source !== entry && existsSync(join(projectRoot, source ?? '')), `${name}: ${entry} is compiled from ${source}`)
  }
})

/** A value that compose takes from deploy/.env: `${NAME}`, `${NAME:?message}` or `${NAME:-}`, NAME documented in the example. */
function fromEnvFile(value: string): string | undefined {
  const name = /^\$\{([A-Z_]+)(?::\?[^}]*|:-)?\}$/.exec(value)?.[1]
  return name !== undefined && envExample.has(name) ? name : undefined
}

t.test('secrets come from deploy/.env only, never as literal values', async (t) => {
  for (const [name, entry] of Object.entries(services)) {
    for (const [variable, value] of Object.entries(environment(entry))) {
      if (fromEnvFile(value) === undefined) t.notMatch(variable, /SECRET|PASSWORD|DATABASE_URL|REDIS_URL/, `${name}: ${variable} is not set in compose.yaml`)
      t.notMatch(value, /:\/\/[^/@]*:[^/@]*@/, `${name}: ${variable} carries no credentials`)
    }
  }
  for (const name of [...appServices, 'postgres', 'redis']) t.same(envFiles(service(name)), [], `${name} is not handed the whole deploy/.env`)
  t.same(
    [...envExample.keys()].sort(),
    [
      'AGENCY_DATABASE_URL',
      'AGENCY_DB_PASSWORD',
      'AGENCY_SERVICE_SIGNING_SECRET',
      'AGENCY_SERVICE_SIGNING_SECRET_PREVIOUS',
      'DATABASE_URL',
      'GATEWAY_DATABASE_URL',
      'GATEWAY_DB_PASSWORD',
      'KEY_CACHE_SECRET',
      'POSTGRES_PASSWORD',
      'REDIS_PASSWORD',
      'REDIS_URL',
      'RESOURCE_DATABASE_URL',
      'RESOURCE_DB_PASSWORD',
      'RESOURCE_SERVICE_SIGNING_SECRET',
      'RESOURCE_SERVICE_SIGNING_SECRET_PREVIOUS',
    ],
    'deploy/.env.example documents every secret',
  )
  for (const [variable, value] of envExample) t.equal(value, '', `${variable} has no value in the example`)
  const ignored = readProjectFile('.gitignore')
    .split('\n')
    .map((line) => line.trim())
  t.ok(ignored.includes('deploy/.env'), 'the real deploy/.env is git-ignored')
})

t.test('containers run as the unprivileged user, without capabilities', async (t) => {
  for (const name of appServices) {
    const entry = service(name)
    t.equal(entry.user, '10001:10001', `${name}: numeric non-root user`)
    t.same(entry.cap_drop, ['ALL'], `${name}: drops every capability`)
    t.ok(entry.security_opt?.includes('no-new-privileges:true'), `${name}: no privilege escalation`)
    t.not(entry.privileged, true, `${name}: not privileged`)
  }
})

for (const [name, , hostVariable, probeVariable] of longRunning) {
  t.test(`${name}: health check on /readyz at the port it listens on, reachable from other containers`, async (t) => {
    const entry = service(name)
    const env = environment(entry)
    t.equal(env[hostVariable], '0.0.0.0', `${hostVariable} listens beyond the container's loopback`)
    const test = Array.isArray(entry.healthcheck?.test) ? entry.healthcheck.test.join(' ') : (entry.healthcheck?.test ?? '')
    t.match(test, `http://127.0.0.1:${env[probeVariable]}/readyz`, `probes ${probeVariable}=${env[probeVariable]}`)
  })
}

t.test('TLS inside by default: a one-shot job makes the certificates, each service mounts only its own', async (t) => {
  const certs = service('certs')
  t.equal(certs.restart, 'no', 'a one-shot job')
  t.same(
    certs.command?.slice(3).sort(),
    ['client:gateway', 'server:agency-service', 'server:resource-service'],
    'a server certificate per backend, a client one for the gateway',
  )
  const root = certs.command?.[2] ?? ''
  const jobVolumes = new Map((certs.volumes ?? []).map((volume) => [volume.split(':')[1], volume.split(':')[0]]))
  t.equal(jobVolumes.get(`${root}/ca`), 'internal-ca', 'the CA key lies in a volume of its own')
  for (const name of ['agency-service', 'resource-service', 'gateway']) {
    const entry = service(name)
    const volume = jobVolumes.get(`${root}/${name}`)
    t.ok(volume, `${name}'s certificate lies in a volume of its own`)
    t.ok(entry.volumes?.includes(`${volume}:/etc/scoped-api/internal-tls:ro`), `${name} mounts its own, read-only`)
    const others = [...jobVolumes.values()].filter((other) => other !== volume)
    t.notOk(
      entry.volumes?.some((mount) => others.includes(mount.split(':')[0]!)),
      `${name} mounts no other's key, nor the CA's`,
    )
    const dependencies = entry.depends_on
    if (!Array.isArray(dependencies) && name !== 'gateway') {
      t.equal(dependencies?.certs?.condition, 'service_completed_successfully', `${name} starts after the certificates are made`)
    }
  }
  for (const [name, portVariable] of longRunning.slice(0, 2)) {
    const env = environment(service(name))
    const prefix = portVariable.replace(/_PORT$/, '')
    t.same(
      [env[`${prefix}_TLS_CERT_FILE`], env[`${prefix}_TLS_KEY_FILE`], env[`${prefix}_TLS_CLIENT_CA_FILE`]],
      ['/etc/scoped-api/internal-tls/tls.crt', '/etc/scoped-api/internal-tls/tls.key', '/etc/scoped-api/internal-tls/ca.crt'],
      `${name} listens with mutual TLS, with its mounted certificate`,
    )
  }
  for (const route of rawRoutes(readProjectFile('deploy/routes.compose.yaml'), 'deploy/routes.compose.yaml')) {
    t.match(route.upstream, /^https:\/\//, `${route.prefix}: an https upstream`)
    t.same(
      route.tls,
      { caFile: '/etc/scoped-api/internal-tls/ca.crt', certFile: '/etc/scoped-api/internal-tls/tls.crt', keyFile: '/etc/scoped-api/internal-tls/tls.key' },
      `${route.prefix}: the internal CA and the gateway's client certificate`,
    )
  }
})

t.test('Postgres and Redis have health checks the others wait on', async (t) => {
  t.ok(service('postgres').healthcheck?.test, 'Postgres health check')
  t.ok(service('redis').healthcheck?.test, 'Redis health check')
})

t.test('Redis requires a password: its default user is off, and the services log in as an ACL user', async (t) => {
  const command = [service('redis').command].flat().join(' ')
  t.match(command, /--user default off/, 'no anonymous access')
  t.match(command, /--user scoped on ">\$\$REDIS_PASSWORD"/, 'the ACL user, with the password from deploy/.env')
  t.match(command, /-@admin/, 'without admin commands')
  t.notMatch(command, /--appendonly yes/, 'no persistence')
})

t.test('the gateway reads a route map whose upstreams are the compose services', async (t) => {
  const gateway = service('gateway')
  const routesFile = environment(gateway).ROUTES_FILE
  const mount = gateway.volumes?.find((volume) => volume.split(':')[1] === routesFile)
  t.equal(mount, `./routes.compose.yaml:${routesFile}:ro`, 'ROUTES_FILE is deploy/routes.compose.yaml, mounted read-only')
  const text = readProjectFile('deploy/routes.compose.yaml')
  t.doesNotThrow(() => parseRouteMap(withoutTlsFiles(text, 'deploy/routes.compose.yaml'), 'deploy/routes.compose.yaml'), 'the gateway accepts it')
  for (const route of rawRoutes(text, 'deploy/routes.compose.yaml')) {
    const upstream = new URL(route.upstream)
    const target = services[upstream.hostname]
    const listening = longRunning.find(([candidate]) => candidate === upstream.hostname)
    t.ok(target && listening, `${route.prefix}: ${upstream.hostname} is a backend service`)
    if (target !== undefined && listening !== undefined) {
      t.equal(upstream.port, environment(target)[listening[1]], `${route.prefix}: the port ${upstream.hostname} listens on`)
    }
    t.not(upstream.hostname, 'gateway', `${route.prefix}: never routes back to the gateway`)
  }
  const defaults = rawRoutes(readProjectFile('deploy/routes.yaml'), 'deploy/routes.yaml')
  t.same(routeShapes(rawRoutes(text, 'deploy/routes.compose.yaml')), routeShapes(defaults), 'the same routes as deploy/routes.yaml')
  t.same(routeLimits(text, 'deploy/routes.compose.yaml'), routeLimits(readProjectFile('deploy/routes.yaml'), 'deploy/routes.yaml'), 'and the same rate limits')
})

t.test('least privilege: each service connects as its own login; only the migrations run as the owner', async (t) => {
  const own: Array<[string, string]> = [
    ['gateway', 'GATEWAY_DATABASE_URL'],
    ['agency-service', 'AGENCY_DATABASE_URL'],
    ['resource-service', 'RESOURCE_DATABASE_URL'],
  ]
  for (const [name, variable] of own)
    t.equal(fromEnvFile(environment(service(name))['DATABASE_URL'] ?? ''), variable, `${name}: DATABASE_URL is ${variable} from deploy/.env`)
  t.equal(fromEnvFile(environment(service('migrate'))['DATABASE_URL'] ?? ''), 'DATABASE_URL', "migrate uses deploy/.env's DATABASE_URL, the owner's")
  const example = readProjectFile('deploy/.env.example')
  for (const [login, password] of [
    ['gateway', 'GATEWAY_DB_PASSWORD'],
    ['agency_service', 'AGENCY_DB_PASSWORD'],
    ['resource_service', 'RESOURCE_DB_PASSWORD'],
  ] as const) {
    t.match(example, `postgresql://${login}:<${password}>@postgres:5432/scoped`, `the example shows ${login}'s connection string`)
  }
  t.ok(
    service('postgres').volumes?.includes('./postgres-init.sql:/docker-entrypoint-initdb.d/10-service-logins.sql:ro'),
    'postgres makes the logins on its first start',
  )
  const init = readProjectFile('deploy/postgres-init.sql')
  for (const group of ['scoped_gateway', 'scoped_resource', 'scoped_agency']) t.match(init, `CREATE ROLE ${group} NOLOGIN;`, `${group} is a group role`)
  for (const [login, group, variable] of [
    ['gateway', 'scoped_gateway', 'GATEWAY_DB_PASSWORD'],
    ['agency_service', 'scoped_agency', 'AGENCY_DB_PASSWORD'],
    ['resource_service', 'scoped_resource', 'RESOURCE_DB_PASSWORD'],
  ] as const) {
    const psqlVariable = `${login.split('_')[0]}_password`
    t.match(init, `\\getenv ${psqlVariable} ${variable}`, `${login}'s password comes from ${variable}`)
    t.match(init, `CREATE ROLE ${login} LOGIN PASSWORD :'${psqlVariable}' IN ROLE ${group};`, `${login} is a member of ${group} only`)
  }
})
