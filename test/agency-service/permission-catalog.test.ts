/**
 * What agency-service reads of the routes file (ROUTES_FILE): each scoped
 * route's rate limits, the scope's defaults with the route's own in their
 * place, as the gateway applies them; a bad limit stops it as it stops the
 * gateway, naming the file and the route.
 */
import t from 'tap'
import { parsePermissionCatalog } from '@scoped/agency-service/keys/permission-catalog'

t.test('route limits: the scope defaults, replaced kind by kind by a route’s own; a bad one refused', async (t) => {
  const catalog = parsePermissionCatalog(
    `rateLimits:
  SUB-ACCOUNT: { key: { rate: 5, burst: 10 }, tenant: { rate: 50, burst: 100 } }
routes:
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: 'http://a', permission: agents }
  - { prefix: /v1/calls, scope: SUB-ACCOUNT, upstream: 'http://a', permission: calls, rateLimit: { key: { rate: 1, burst: 2 } } }
  - { prefix: /v1/agency, scope: AGENCY, upstream: 'http://a', permission: agency }
  - { prefix: /console, auth: session, upstream: 'http://a' }
`,
    'routes.yaml',
  )
  t.same(catalog.routeLimits['SUB-ACCOUNT'], [
    { prefix: '/v1/agents', limits: { key: { rate: 5, burst: 10 }, tenant: { rate: 50, burst: 100 } } },
    { prefix: '/v1/calls', limits: { key: { rate: 1, burst: 2 }, tenant: { rate: 50, burst: 100 } } },
  ])
  t.same(catalog.routeLimits.AGENCY, [{ prefix: '/v1/agency', limits: {} }], 'no limits: none')
  t.throws(
    () =>
      parsePermissionCatalog(
        `routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: 'http://a', rateLimit: { key: { rate: 0, burst: 1 } } }\n`,
        'routes.yaml',
      ),
    { message: /^routes\.yaml: route \/v1\/agents: rateLimit\.key\.rate must be a number of tokens per second above 0/ },
  )
})
