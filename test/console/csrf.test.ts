import t from 'tap'
import { ConsoleClient, createWorld, csrfToken, signedIn, startConsole } from './console-harness.js'

t.test('every state-changing request needs the session CSRF token and a same-origin browser', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  const token = csrfToken((await owner.get(keysPath)).body)

  const someoneElse = await signedIn(app, world.admin.email)
  const otherToken = csrfToken((await someoneElse.get(keysPath)).body)

  const refused: Array<[string, Record<string, string>, Record<string, string | undefined>, number]> = [
    ['no token', { name: 'k' }, {}, 403],
    ['an empty token', { csrf: '', name: 'k' }, {}, 403],
    ['a wrong token', { csrf: `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`, name: 'k' }, {}, 403],
    ["another session's token", { csrf: otherToken, name: 'k' }, {}, 403],
    ['Sec-Fetch-Site: cross-site', { csrf: token, name: 'k' }, { 'sec-fetch-site': 'cross-site' }, 403],
    ['Sec-Fetch-Site: same-site (a sibling subdomain)', { csrf: token, name: 'k' }, { 'sec-fetch-site': 'same-site' }, 403],
    ['an Origin of another site', { csrf: token, name: 'k' }, { origin: 'https://evil.example', 'sec-fetch-site': undefined }, 403],
    ['Origin: null', { csrf: token, name: 'k' }, { origin: 'null', 'sec-fetch-site': undefined }, 403],
    ['another port of the same host', { csrf: token, name: 'k' }, { origin: 'http://localhost:8080', 'sec-fetch-site': undefined }, 403],
  ]
  for (const [what, form, headers, status] of refused) {
    const response = await owner.post(keysPath, form, headers)
    t.equal(response.statusCode, status, what)
    t.match(response.headers['content-type'], /text\/html/, `${what}: a page`)
  }

  const json = await app.inject({
    method: 'POST',
    url: keysPath,
    headers: { cookie: `__Secure-sak-console-session=${owner.jar.get('__Secure-sak-console-session')!.value}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ csrf: token, name: 'k' }),
  })
  t.equal(json.statusCode, 415, 'a JSON body is not a form')
  t.equal((await pool.query('SELECT 1 FROM api_keys')).rowCount, 0, 'no refused request created a key')

  // The same checks guard revoke and delete.
  const created = await owner.post(keysPath, { csrf: token, name: 'billing sync' })
  t.equal(created.statusCode, 303, 'with the right token it works')
  const { rows } = await pool.query<{ id: string }>('SELECT id FROM api_keys')
  const keyId = rows[0]!.id
  for (const action of ['revoke', 'delete']) {
    t.equal((await owner.post(`${keysPath}/${keyId}/${action}`, {})).statusCode, 403, `${action} without a token`)
    t.equal((await owner.post(`${keysPath}/${keyId}/${action}`, { csrf: otherToken })).statusCode, 403, `${action} with another session's token`)
  }
  const { rows: after } = await pool.query('SELECT revoked_at FROM api_keys WHERE id = $1', [keyId])
  t.same(after, [{ revoked_at: null }], 'the key is neither revoked nor deleted')
})

t.test('behind the gateway (host rewritten to the backend) a browser is judged by Sec-Fetch-Site, else by Origin against x-forwarded-host', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = await signedIn(app, world.owner.email)
  const keysPath = `/console/agencies/${world.agencyId}/keys`
  const token = csrfToken((await owner.get(keysPath)).body)
  const browser = { host: '127.0.0.1:4001', origin: 'https://127.0.0.1:8443' }
  t.equal((await owner.post(keysPath, { csrf: token, name: 'k0' }, { ...browser, 'sec-fetch-site': 'same-origin' })).statusCode, 303, 'a current browser')
  t.equal((await owner.post(keysPath, { csrf: token, name: 'k0' }, { ...browser, 'sec-fetch-site': 'cross-site' })).statusCode, 403)
  t.equal(
    (await owner.post(keysPath, { csrf: token, name: 'k0' }, { ...browser, 'sec-fetch-site': undefined })).statusCode,
    403,
    'no Fetch Metadata and no x-forwarded-host: refused',
  )
  const headers = { host: '127.0.0.1:4001', 'x-forwarded-host': 'console.example:8443', 'sec-fetch-site': undefined }
  t.equal((await owner.post(keysPath, { csrf: token, name: 'k1' }, { ...headers, origin: 'https://console.example:8443' })).statusCode, 303)
  t.equal((await owner.post(keysPath, { csrf: token, name: 'k2' }, { ...headers, origin: 'https://evil.example:8443' })).statusCode, 403)
  t.equal(
    (await owner.post(keysPath, { csrf: token, name: 'k3' }, { ...headers, origin: undefined })).statusCode,
    303,
    'a client that sends no Origin still needs the token',
  )
  t.equal((await owner.post(keysPath, { name: 'k4' }, { ...headers, origin: undefined })).statusCode, 403)
})

t.test('a missing session is no way around CSRF: the forged post is sent to sign in', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const stranger = new ConsoleClient(app)
  const response = await stranger.post(`/console/agencies/${world.agencyId}/keys`, { name: 'k' }, { 'sec-fetch-site': 'cross-site' })
  t.equal(response.statusCode, 303)
  t.equal((await pool.query('SELECT 1 FROM api_keys')).rowCount, 0)
})
