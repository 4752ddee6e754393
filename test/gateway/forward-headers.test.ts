/** Which headers cross the gateway, each way: table rows over raw header lists, hostile ones included; both ways as flat lists. */
import t from 'tap'
import { callerHeaders, returnedHeaders } from '@scoped/gateway/forward-headers'

const raw = (...pairs: string[]): string[] => pairs

t.test('upstream: credentials, tenant claims, hop-by-hop and gateway-set headers never go; cookies only to console routes', async (t) => {
  const rows: Array<[string, string[], boolean, string[]]> = [
    ['plain', raw('Accept', 'application/json', 'User-Agent', 'x'), false, ['accept', 'application/json', 'user-agent', 'x']],
    ['credentials', raw('Authorization', 'Bearer k', 'X-API-Key', 'k', 'Proxy-Authorization', 'Basic x', 'accept', '*/*'), false, ['accept', '*/*']],
    [
      'tenant claims in any case',
      raw('X-Tenant-Scope', 'AGENCY', 'x-tenant-agency-id', 'a', 'X-TENANT-anything', 'y', 'content-digest', 'sha-256=:x:'),
      false,
      [],
    ],
    [
      'hop-by-hop and expect',
      raw(
        'Connection',
        'keep-alive, X-Secret',
        'X-Secret',
        's',
        'Keep-Alive',
        '5',
        'TE',
        'trailers',
        'Transfer-Encoding',
        'chunked',
        'Upgrade',
        'h2c',
        'Expect',
        '100-continue',
      ),
      false,
      [],
    ],
    [
      'set by the gateway',
      raw(
        'Host',
        'evil',
        'Content-Length',
        '5',
        'X-Request-Id',
        'r',
        'X-Forwarded-For',
        '1.2.3.4',
        'Forwarded',
        'for=1.2.3.4',
        'X-Forwarded-Host',
        'h',
        'X-Forwarded-Proto',
        'http',
      ),
      false,
      [],
    ],
    [
      'names listed by Connection headers, wherever they stand and however many there are',
      raw('X-Secret', 's', 'Connection', 'X-SECRET', 'Accept', 'a', 'connection', 'x-other ,  close', 'X-Other', 'o'),
      false,
      ['accept', 'a'],
    ],
    ['cookies to an API route', raw('Cookie', 'a=1', 'Cookie', 'b=2'), false, []],
    ['cookies to a console route, repeated headers kept in order', raw('Cookie', 'a=1', 'Cookie', 'b=2'), true, ['cookie', 'a=1', 'cookie', 'b=2']],
  ]
  for (const [name, headers, keepCookies, expected] of rows) t.same(callerHeaders(headers, keepCookies), expected, name)
})

t.test('downstream: hop-by-hop headers and the gateway’s own are dropped; the rest are kept as they are', async (t) => {
  t.same(
    returnedHeaders({
      'content-type': 'application/json',
      'set-cookie': ['a=1', 'b=2'],
      connection: 'close, x-hop',
      'x-hop': '1',
      'keep-alive': 'timeout=5',
      'transfer-encoding': 'chunked',
      'x-request-id': 'upstream',
      'strict-transport-security': 'max-age=0',
      etag: '"1"',
      absent: undefined,
    }),
    ['content-type', 'application/json', 'set-cookie', 'a=1', 'set-cookie', 'b=2', 'etag', '"1"'],
  )
})

t.test('downstream: the gateway’s own headers (HSTS, x-request-id, rate limits) are set over the backend’s', async (t) => {
  const own = ['strict-transport-security', 'max-age=63072000', 'x-request-id', 'r-1', 'ratelimit', '"key";r=1;t=1', 'retry-after', '3']
  const upstream = { 'content-type': 'application/json', ratelimit: 'forged', 'x-request-id': 'upstream', connection: 'keep-alive' }
  t.same(returnedHeaders(upstream, own), ['content-type', 'application/json', ...own])
})
