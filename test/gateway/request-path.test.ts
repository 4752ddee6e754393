import t from 'tap'
import { normalizePath, normalizeRequestTarget, pathWithQuery } from '@scoped/gateway/request-path'
import { matchRoute, parseRouteMap } from '@scoped/gateway/route-map'

const refused = undefined
/** A test name that stays on one TAP line whatever the row holds. */
const show = (raw: string): string => JSON.stringify(raw).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)

// Rows: raw request target → canonical path (or refused, which the gateway answers with 400).
const paths: Array<[string, string | undefined]> = [
  // accepted as they are
  ['/', '/'],
  ['/v1/agents', '/v1/agents'],
  ['/v1/agents/', '/v1/agents/'],
  ['/v1/agents/0f8c-4b2e', '/v1/agents/0f8c-4b2e'],
  ["/v1/contacts/a.b_c~d!$&'()*+,=:@", "/v1/contacts/a.b_c~d!$&'()*+,=:@"],
  ['/v1/contacts/john..doe', '/v1/contacts/john..doe'],
  ['/v1/contacts/.hidden', '/v1/contacts/.hidden'],
  ['/v1/contacts/...', refused],
  // encoded unreserved characters are decoded; other escapes are kept, in upper case
  ['/v1/%61gents', '/v1/agents'],
  ['/v1/%41GENTS', '/v1/AGENTS'],
  ['/v1/agents/%7e%2d%5F', '/v1/agents/~-_'],
  ['/v1/contacts/a%20b', '/v1/contacts/a%20b'],
  ['/v1/contacts/caf%c3%a9', '/v1/contacts/caf%C3%A9'],
  ['/v1/contacts/%3b', '/v1/contacts/%3B'],
  ['/v1/contacts/%3F%23', '/v1/contacts/%3F%23'],
  ['/v1/contacts/%F0%9F%98%80', '/v1/contacts/%F0%9F%98%80'],
  // dot segments, in every spelling
  ['/v1/agents/..', refused],
  ['/v1/agents/../agency', refused],
  ['/v1/agents/.', refused],
  ['/v1/agents/./x', refused],
  ['/v1/./agents', refused],
  ['/v1/agents/%2e%2e/agency', refused],
  ['/v1/agents/%2E%2E/agency', refused],
  ['/v1/agents/%2e%2E/agency', refused],
  ['/v1/agents/.%2e/agency', refused],
  ['/v1/agents/%2e./agency', refused],
  ['/v1/agents/%2e', refused],
  ['/v1/agents/..%2fagency', refused],
  ['/v1/agents/..%2Fagency', refused],
  ['/v1/agents/..;/agency', refused],
  ['/v1/agents/..x', refused],
  ['/v1/agents/x..', refused],
  // encoded separators and double encoding
  ['/v1/agents%2f..%2fagency', refused],
  ['/v1/agents/%2F', refused],
  ['/v1/agents/%5c', refused],
  ['/v1/agents/%5C..%5Cagency', refused],
  ['/v1/agents/%252e%252e', refused],
  ['/v1/agents/%25', refused],
  // repeated slashes
  ['//v1/agents', refused],
  ['/v1//agents', refused],
  ['/v1/agents//', refused],
  ['/v1/agents///x', refused],
  // matrix parameters
  ['/v1/agents;x=1', refused],
  ['/v1/agents/;', refused],
  ['/v1/agency;/../agents', refused],
  // backslashes
  ['/v1/agents\\..\\agency', refused],
  ['\\v1\\agents', refused],
  // control characters, NUL, non-ASCII
  ['/v1/agents/%00', refused],
  ['/v1/agents/\u0000', refused],
  ['/v1/agents/%0a', refused],
  ['/v1/agents/%7F', refused],
  ['/v1/agents/\t', refused],
  ['/v1/agents/caf\u00e9', refused],
  ['/v1/agents/\u2028', refused],
  // malformed percent-encoding and invalid UTF-8
  ['/v1/agents/%', refused],
  ['/v1/agents/%4', refused],
  ['/v1/agents/%zz', refused],
  ['/v1/agents/%c3', refused],
  ['/v1/agents/%c3%28', refused],
  ['/v1/agents/%C0%AF', refused],
  ['/v1/agents/%ED%A0%80', refused],
  ['/v1/agents/%FF', refused],
  // other characters outside the path alphabet
  ['/v1/agents/<script>', refused],
  ['/v1/agents/a b', refused],
  ['/v1/agents/"', refused],
  ['/v1/agents/{x}', refused],
  ['/v1/agents/a|b', refused],
  ['/v1/agents#x', refused],
  ['/v1/agents/[1]', refused],
  // not origin form
  ['', refused],
  ['*', refused],
  ['v1/agents', refused],
  ['http://evil.example/v1/agents', refused],
]

for (const [raw, expected] of paths) {
  t.test(`path ${show(raw)}`, async (t) => {
    t.equal(normalizePath(raw), expected)
  })
}

const targets: Array<[string, { path: string; query: string } | undefined]> = [
  ['/v1/agents', { path: '/v1/agents', query: '' }],
  ['/v1/agents?', { path: '/v1/agents', query: '' }],
  ['/v1/agents?limit=5&cursor=a%2Fb', { path: '/v1/agents', query: 'limit=5&cursor=a%2Fb' }],
  ['/v1/agents?a=..%2f&b=//', { path: '/v1/agents', query: 'a=..%2f&b=//' }],
  ['/v1/agents?q=a;b', { path: '/v1/agents', query: 'q=a;b' }],
  ['/v1/%61gents?x=%61', { path: '/v1/agents', query: 'x=%61' }],
  ['/v1/agents?x=%zz', refused],
  ['/v1/agents?x=%', refused],
  ['/v1/agents?x=\u0000', refused],
  ['/v1/agents?x=caf\u00e9', refused],
  ['/v1/agents?x=a#b', refused],
  ['/v1/agents/..?x=1', refused],
  ['/v1//agents?x=1', refused],
]
for (const [raw, expected] of targets) {
  t.test(`target ${show(raw)}`, async (t) => {
    t.same(normalizeRequestTarget(raw), expected)
  })
}

t.test('the path with query that is signed and forwarded', async (t) => {
  t.equal(pathWithQuery('/v1/agents', ''), '/v1/agents')
  t.equal(pathWithQuery('/v1/agents', 'limit=5'), '/v1/agents?limit=5')
})

t.test('every accepted path survives the WHATWG URL parser unchanged (whatever parses it behind the gateway sees the path that was signed)', async (t) => {
  for (const [raw, expected] of paths) {
    if (expected === undefined) continue
    const canonical = normalizePath(raw)!
    t.equal(new URL(`http://127.0.0.1:4002${canonical}`).pathname, canonical, raw)
    // A proxy's traversal guard (reply-from's, say) refuses a path whose decoded form holds /.. or ../
    const decoded = decodeURIComponent(canonical)
    t.notOk(decoded.includes('/..') || decoded.includes('../'), `${raw} passes a traversal guard`)
  }
})

// Route matching runs on the canonical path; hostile targets never reach it.
const map = parseRouteMap(
  `routes:
  - { prefix: /v1/agency, scope: AGENCY, upstream: "http://127.0.0.1:4001" }
  - { prefix: /v1/agency/sub-accounts, scope: AGENCY, upstream: "http://127.0.0.1:4003" }
  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:4002" }
  - { prefix: /console, auth: session, upstream: "http://127.0.0.1:4001" }
`,
  'test routes',
)

const matches: Array<[string, string | undefined | 'refused']> = [
  ['/v1/agency', '/v1/agency'],
  ['/v1/agency/', '/v1/agency'],
  ['/v1/agency/x', '/v1/agency'],
  ['/v1/agency/sub-accounts', '/v1/agency/sub-accounts'],
  ['/v1/agency/sub-accounts/1/x', '/v1/agency/sub-accounts'],
  ['/v1/agency/sub-accountsx', '/v1/agency'],
  ['/v1/agencyx', undefined],
  ['/v1/agencyx/y', undefined],
  ['/v1/agenc', undefined],
  ['/v1/agents', '/v1/agents'],
  ['/v1/%61gents', '/v1/agents'],
  ['/v1/agents%2f..%2fagency', 'refused'],
  ['/v1/agents/../agency', 'refused'],
  ['/v1/agents/%2e%2e/agency', 'refused'],
  ['/v1/agents/%2E%2E/agency', 'refused'],
  ['/v1/agents/..%2fagency', 'refused'],
  ['/v1/agents/..;/agency', 'refused'],
  ['/v1/agents;/../agency', 'refused'],
  ['//v1/agency', 'refused'],
  ['/v1/agents/./x', 'refused'],
  ['/v1/agents/%5c..%5cagency', 'refused'],
  ['/v1/agents\\..\\agency', 'refused'],
  ['/v1/agents/%00', 'refused'],
  ['/v1/agents/%252e%252e/agency', 'refused'],
  ['/V1/AGENTS', undefined],
  ['/V1/agency', undefined],
  ['/v1/Agency', undefined],
  ['/v1', undefined],
  ['/', undefined],
  ['/console', '/console'],
  ['/console/keys', '/console'],
  ['/consolex', undefined],
  ['/Console', undefined],
]
for (const [raw, expected] of matches) {
  t.test(`route for ${show(raw)}`, async (t) => {
    const target = normalizeRequestTarget(raw)
    if (expected === 'refused') {
      t.equal(target, undefined, 'refused before routing')
      return
    }
    t.ok(target, 'accepted')
    t.equal(matchRoute(map, target!.path)?.prefix, expected)
  })
}
