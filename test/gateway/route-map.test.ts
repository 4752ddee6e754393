import t from 'tap'
import { readFileSync } from 'node:fs'
import { ConfigError } from '@scoped/shared/config'
import { readGatewayConfig, defaultRoutesFile } from '@scoped/gateway/config'
import { matchRoute, parseRouteMap } from '@scoped/gateway/route-map'

const up = 'http://127.0.0.1:4001'
const yaml = (routes: string): string => `routes:\n${routes}`

t.test('a valid map: fields, order by longest prefix, upstream reduced to its origin', async (t) => {
  const map = parseRouteMap(
    yaml(`  - { prefix: /v1/agency, scope: AGENCY, upstream: "${up}/" }
  - { prefix: /v1/agency/sub-accounts, scope: AGENCY, upstream: "https://agency.internal:8443" }
  - { prefix: /console, auth: session, upstream: "${up}" }
  - { prefix: /v1, scope: SUB-ACCOUNT, upstream: "${up}" }
`),
    'routes.yaml',
  )
  t.same(
    map.routes.map((route) => [route.prefix, route.auth, route.scope, route.upstream, route.index]),
    [
      ['/v1/agency', 'key', 'AGENCY', up, 0],
      ['/v1/agency/sub-accounts', 'key', 'AGENCY', 'https://agency.internal:8443', 1],
      ['/console', 'session', null, up, 2],
      ['/v1', 'key', 'SUB-ACCOUNT', up, 3],
      // Added by the gateway: the leak reports, to the console's upstream (agency-service).
      ['/v1/secret-scanning/github', 'none', null, up, 4],
      ['/v1/credentials/revoke', 'none', null, up, 5],
    ],
  )
  t.equal(matchRoute(map, '/v1/agency/sub-accounts/x')?.prefix, '/v1/agency/sub-accounts')
  t.equal(matchRoute(map, '/v1/agencyx')?.prefix, '/v1', 'falls back to the shorter prefix on whole segments')
  t.ok(Object.isFrozen(map) && Object.isFrozen(map.routes[0]), 'frozen')
})

// Rows: the file's text → a fragment of the error message (every message starts with the source name).
const invalid: Array<[string, string, RegExp]> = [
  ['not YAML', 'routes: [', /not valid YAML/],
  ['duplicate YAML key', `routes: []\nroutes: []`, /not valid YAML/],
  ['empty file', '', /must be a mapping/],
  ['a list at the top', '- prefix: /v1/agents', /must be a mapping/],
  ['unknown top-level field', `routes: []\nversion: 2`, /unknown field "version"/],
  ['no routes', 'routes: []', /non-empty list/],
  ['routes not a list', 'routes: {}', /non-empty list/],
  ['route not a mapping', yaml('  - /v1/agents'), /routes\[0\] must be a mapping/],
  ['unknown field in a route', yaml(`  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "${up}", timeout: 5 }`), /unknown field "timeout"/],
  ['misspelt field', yaml(`  - { prefx: /v1/agents, scope: SUB-ACCOUNT, upstream: "${up}" }`), /unknown field "prefx"/],
  ['unknown scope', yaml(`  - { prefix: /v1/agents, scope: ADMIN, upstream: "${up}" }`), /unknown scope "ADMIN"/],
  ['scope in lower case', yaml(`  - { prefix: /v1/agents, scope: agency, upstream: "${up}" }`), /unknown scope "agency"/],
  ['neither scope nor auth', yaml(`  - { prefix: /v1/agents, upstream: "${up}" }`), /scope .* or auth: session is required/],
  ['both scope and auth', yaml(`  - { prefix: /console, scope: AGENCY, auth: session, upstream: "${up}" }`), /either scope or auth: session, not both/],
  ['unknown auth', yaml(`  - { prefix: /console, auth: cookie, upstream: "${up}" }`), /unknown auth "cookie"/],
  ['session route under /v1', yaml(`  - { prefix: /v1/console, auth: session, upstream: "${up}" }`), /must be outside \/v1/],
  ['session route at /v1', yaml(`  - { prefix: /v1, auth: session, upstream: "${up}" }`), /must be outside \/v1/],
  ['session route at / (would cover /v1)', yaml(`  - { prefix: /, auth: session, upstream: "${up}" }`), /must be outside \/v1/],
  ['scoped route outside /v1', yaml(`  - { prefix: /v2/agents, scope: SUB-ACCOUNT, upstream: "${up}" }`), /must be under \/v1/],
  ['scoped route at /', yaml(`  - { prefix: /, scope: AGENCY, upstream: "${up}" }`), /must be under \/v1/],
  ['scoped route at /v1x', yaml(`  - { prefix: /v1x, scope: AGENCY, upstream: "${up}" }`), /must be under \/v1/],
  [
    'duplicate prefix',
    yaml(`  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "${up}" }\n  - { prefix: /v1/agents, scope: AGENCY, upstream: "${up}" }`),
    /duplicate prefix \/v1\/agents/,
  ],
  ['missing prefix', yaml(`  - { scope: AGENCY, upstream: "${up}" }`), /prefix is required/],
  ['prefix without a leading slash', yaml(`  - { prefix: v1/agents, scope: SUB-ACCOUNT, upstream: "${up}" }`), /not a canonical path/],
  ['prefix with a trailing slash', yaml(`  - { prefix: /v1/agents/, scope: SUB-ACCOUNT, upstream: "${up}" }`), /must not end with \//],
  ['prefix with ..', yaml(`  - { prefix: /v1/x/../agents, scope: SUB-ACCOUNT, upstream: "${up}" }`), /not a canonical path/],
  ['prefix with //', yaml(`  - { prefix: /v1//agents, scope: SUB-ACCOUNT, upstream: "${up}" }`), /not a canonical path/],
  ['prefix with an escape', yaml(`  - { prefix: /v1/%61gents, scope: SUB-ACCOUNT, upstream: "${up}" }`), /not a canonical path/],
  ['prefix with ;', yaml(`  - { prefix: "/v1/agents;x", scope: SUB-ACCOUNT, upstream: "${up}" }`), /not a canonical path/],
  ['prefix not a string', yaml(`  - { prefix: 5, scope: SUB-ACCOUNT, upstream: "${up}" }`), /prefix is required/],
  ['missing upstream', yaml('  - { prefix: /v1/agents, scope: SUB-ACCOUNT }'), /upstream is required/],
  [
    'upstream not a URL',
    yaml('  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "127.0.0.1:4002" }'),
    /must use http:\/\/ or https:\/\/|not a valid URL/,
  ],
  ['upstream garbage', yaml('  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://" }'), /not a valid URL/],
  ['upstream with another protocol', yaml('  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "ftp://127.0.0.1" }'), /must use http:\/\/ or https:\/\//],
  ['upstream with a path', yaml('  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:4002/base" }'), /origin only/],
  ['upstream with a query', yaml('  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:4002/?x=1" }'), /origin only/],
  ['upstream with credentials', yaml('  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://u:p@127.0.0.1:4002" }'), /credentials/],
]

for (const [name, text, message] of invalid) {
  t.test(`refused: ${name}`, async (t) => {
    t.throws(() => parseRouteMap(text, 'my-routes.yaml'), { message: /^my-routes\.yaml: / })
    t.throws(() => parseRouteMap(text, 'my-routes.yaml'), { message })
  })
}

t.test('deploy/routes.yaml is the default map and holds the contract routes', async (t) => {
  t.match(defaultRoutesFile, /deploy\/routes\.yaml$/)
  const map = parseRouteMap(readFileSync(defaultRoutesFile, 'utf8'), defaultRoutesFile)
  const summary = map.routes.map((route) => `${route.prefix} ${route.auth === 'key' ? route.scope : route.auth} ${route.upstream}`)
  t.same(summary, [
    '/v1/agency AGENCY http://127.0.0.1:4001',
    '/v1/agency/sub-accounts AGENCY http://127.0.0.1:4001',
    '/v1/agents SUB-ACCOUNT http://127.0.0.1:4002',
    '/v1/contacts SUB-ACCOUNT http://127.0.0.1:4002',
    '/v1/calls SUB-ACCOUNT http://127.0.0.1:4002',
    '/v1/usage SUB-ACCOUNT http://127.0.0.1:4001',
    '/v1/request-log SUB-ACCOUNT http://127.0.0.1:4001',
    '/console session http://127.0.0.1:4001',
    '/v1/secret-scanning/github none http://127.0.0.1:4001',
    '/v1/credentials/revoke none http://127.0.0.1:4001',
  ])
  // Every API route limits each tenant (docs/operations.md, "Default rate limits"), sub-account routes each agency too.
  for (const route of map.routes) {
    if (route.auth !== 'key') continue
    t.ok(route.rateLimits.tenant !== undefined, `${route.prefix}: a tenant limit`)
    if (route.scope === 'SUB-ACCOUNT') t.ok(route.rateLimits.agency !== undefined, `${route.prefix}: an agency limit`)
  }
  // One resource per route (issue 30): what a restricted key is given permissions on.
  t.same(
    map.routes.flatMap((route) => (route.auth === 'key' ? [route.permission?.resource] : [])),
    ['agency', 'sub-accounts', 'agents', 'contacts', 'calls', 'usage', 'request-log'],
  )
  const config = readGatewayConfig({ TENANT_SIGNING_SECRET: 'x'.repeat(32) })
  t.equal(config.routesFile, defaultRoutesFile, 'used when ROUTES_FILE is unset')
})

t.test('a bad ROUTES_FILE stops start-up with a ConfigError naming ROUTES_FILE and the problem', async (t) => {
  const dir = t.testdir({ 'routes.yaml': yaml(`  - { prefix: /v1/agents, scope: ROOT, upstream: "${up}" }`) })
  const env = { TENANT_SIGNING_SECRET: 'x'.repeat(32), ROUTES_FILE: `${dir}/routes.yaml` }
  t.throws(
    () => readGatewayConfig(env),
    new ConfigError('ROUTES_FILE', `${dir}/routes.yaml: route /v1/agents: unknown scope "ROOT" (expected AGENCY or SUB-ACCOUNT)`),
  )
  t.throws(() => readGatewayConfig({ ...env, ROUTES_FILE: `${dir}/missing.yaml` }), { variable: 'ROUTES_FILE', message: /file not found/ })
})

t.test("a route is signed for the service its upstream is, whatever its scope (the contract's /v1/usage)", async (t) => {
  const map = parseRouteMap(
    `routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: "http://127.0.0.1:4001" }
  - { prefix: /v1/usage, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:4001" }
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:4002" }
  - { prefix: /v1/other, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:4003", audience: billing-service }
  - { prefix: /v1/more, scope: AGENCY, upstream: "http://127.0.0.1:4003" }
`,
    'x',
  )
  // The key routes' audiences (the leak-report routes the gateway adds need no key).
  const audiences = Object.fromEntries(map.routes.filter((route) => route.auth === 'key').map((route) => [route.prefix, route.audience]))
  t.same(audiences, {
    '/v1/agency': 'agency-service',
    '/v1/usage': 'agency-service',
    '/v1/agents': 'resource-service',
    '/v1/other': 'billing-service',
    '/v1/more': 'billing-service',
  })
  const shipped = parseRouteMap(readFileSync(defaultRoutesFile, 'utf8'), defaultRoutesFile)
  t.equal(matchRoute(shipped, '/v1/usage')?.audience, 'agency-service')
  t.equal(matchRoute(shipped, '/v1/request-log')?.audience, 'agency-service')
})
