/**
 * Console sign-in throttling that a stranger cannot turn against an owner:
 * counted per client address and per (email, client address), or per (user,
 * device) for a browser that signed in as that user before; never per email
 * alone. (sign-in-throttle-shared.test.ts: refusals without database work,
 * counts shared by replicas, concurrency, the subjects and the memory bound.)
 */
import t from 'tap'
import { MAX_FAILURES_PER_DEVICE, MAX_FAILURES_PER_EMAIL_AND_CLIENT, SIGN_IN_WINDOW_MS } from '@scoped/agency-service/console/sign-in-throttle'
import { DEVICE_COOKIE, DEVICE_MAX_AGE_SECONDS, deviceCookieValue, readDeviceCookie } from '@scoped/agency-service/console/device-cookie'
import { ConsoleClient, createWorld, PASSWORD, startConsole } from './console-harness.js'

const WRONG = 'definitely not the password'

t.test(`${MAX_FAILURES_PER_EMAIL_AND_CLIENT} failures for one email from one client throttle that pair only, never the email`, async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const guesser = (): ConsoleClient => new ConsoleClient(app, '198.51.100.66')
  for (let i = 1; i <= MAX_FAILURES_PER_EMAIL_AND_CLIENT; i++) t.equal((await guesser().signIn(world.owner.email, WRONG)).statusCode, 401, `failure ${i}`)
  const throttled = await guesser().signIn(world.owner.email, PASSWORD)
  t.equal(throttled.statusCode, 429, 'even the right password is refused from that client')
  t.match(throttled.body, 'Too many failed sign-in attempts')
  t.match(throttled.body, /role="alert"/)
  const retryAfter = Number(throttled.headers['retry-after'])
  t.ok(retryAfter > 0 && retryAfter <= SIGN_IN_WINDOW_MS / 1000, `Retry-After says when (${retryAfter} s)`)
  t.equal((await pool.query('SELECT 1 FROM console_sessions')).rowCount, 0, 'no session was made')
  t.equal((await new ConsoleClient(app, '198.51.100.67').signIn(world.owner.email)).statusCode, 303, 'the owner, from anywhere else, signs in')
  t.equal((await guesser().signIn(world.admin.email)).statusCode, 303, 'and the guessing client may still sign in to another account')
})

t.test('the owner signs in from their own browser while a script hammers their email from another address', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = new ConsoleClient(app, '198.51.100.7')
  t.equal((await owner.signIn(world.owner.email)).statusCode, 303, 'an earlier sign-in from this browser')
  t.ok(owner.jar.has(DEVICE_COOKIE), 'which marked the browser as a known device')
  await owner.submit('/console', '/console/sign-out')

  const script = async (address: string): Promise<number[]> => {
    const statuses: number[] = []
    for (let i = 0; i < MAX_FAILURES_PER_EMAIL_AND_CLIENT + 3; i++)
      statuses.push((await new ConsoleClient(app, address).signIn(world.owner.email, WRONG)).statusCode)
    return statuses
  }
  // The script runs from another address, and from the owner's own (an office NAT), both at once with the owner.
  const [elsewhere, sameAddress, signIn] = await Promise.all([script('192.0.2.66'), script('198.51.100.7'), owner.signIn(world.owner.email)])
  t.ok(elsewhere.includes(429) && sameAddress.includes(429), 'the script is throttled')
  t.equal(signIn.statusCode, 303, 'the owner is not: their browser has its own allowance')
  t.equal((await owner.get('/console')).statusCode, 200, 'and is signed in')

  await owner.submit('/console', '/console/sign-out')
  t.equal((await owner.signIn(world.owner.email)).statusCode, 303, 'again, after the script has exhausted every allowance it has')
  t.equal(
    (await new ConsoleClient(app, '203.0.113.99').signIn(world.owner.email)).statusCode,
    303,
    'a new browser of the owner elsewhere works too: there is no per-email lock',
  )
})

t.test(`a known device has ${MAX_FAILURES_PER_DEVICE} failures of its own, and its failures count nowhere else`, async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = new ConsoleClient(app, '198.51.100.8')
  t.equal((await owner.signIn(world.owner.email)).statusCode, 303)
  await owner.submit('/console', '/console/sign-out')
  for (let i = 1; i <= MAX_FAILURES_PER_DEVICE; i++) t.equal((await owner.signIn(world.owner.email, WRONG)).statusCode, 401, `device failure ${i}`)
  t.equal((await owner.signIn(world.owner.email)).statusCode, 429, 'then this device is throttled')
  t.equal((await new ConsoleClient(app, '198.51.100.8').signIn(world.owner.email)).statusCode, 303, 'another browser at the same address is not')
})

t.test('a successful sign-in forgives the failures of that email from that client', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const client = (): ConsoleClient => new ConsoleClient(app, '198.51.100.17')
  for (let i = 1; i < MAX_FAILURES_PER_EMAIL_AND_CLIENT; i++) await client().signIn(world.owner.email, WRONG)
  t.equal((await client().signIn(world.owner.email)).statusCode, 303)
  for (let i = 1; i < MAX_FAILURES_PER_EMAIL_AND_CLIENT; i++) t.equal((await client().signIn(world.owner.email, WRONG)).statusCode, 401)
  t.equal((await client().signIn(world.owner.email)).statusCode, 303, 'the count started again')
})

t.test('the device cookie: bound to the user and the email it was issued for, signed, and of limited age', async (t) => {
  const secret = Buffer.alloc(32, 7)
  const now = new Date('2030-01-01T00:00:00Z')
  const device = { userId: '11111111-1111-4111-8111-111111111111', deviceId: 'AAAAAAAAAAAAAAAAAAAAAA' }
  const value = deviceCookieValue(secret, device, 'owner@example.test', now)
  t.same(readDeviceCookie(secret, value, 'owner@example.test', now), device, 'verifies for its own email')
  t.equal(readDeviceCookie(secret, value, 'someone-else@example.test', now), undefined, 'gives no allowance when signing in as anyone else')
  t.equal(readDeviceCookie(Buffer.alloc(32, 8), value, 'owner@example.test', now), undefined, 'another secret: refused')
  t.equal(readDeviceCookie(secret, value.replace('11111111-1111', '22222222-2222'), 'owner@example.test', now), undefined, 'another user id: refused')
  t.equal(readDeviceCookie(secret, `${value.slice(0, -2)}AA`, 'owner@example.test', now), undefined, 'a changed MAC: refused')
  const later = new Date(now.getTime() + (DEVICE_MAX_AGE_SECONDS + 60) * 1000)
  t.equal(readDeviceCookie(secret, value, 'owner@example.test', later), undefined, 'too old: refused')
  for (const junk of [undefined, '', 'v1', 'v1.a.b.c.d', `${value}.extra`, 'x'.repeat(500)])
    t.equal(readDeviceCookie(secret, junk, 'owner@example.test', now), undefined, `junk ${JSON.stringify(junk?.slice(0, 20))}`)

  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const browser = new ConsoleClient(app, '198.51.100.50')
  const response = await browser.signIn(world.owner.email)
  const cookie = response.cookies.find((c) => c.name === DEVICE_COOKIE)
  t.ok(cookie, 'a successful sign-in sets it')
  t.match(
    cookie,
    { httpOnly: true, secure: true, sameSite: 'Strict', path: '/console', maxAge: DEVICE_MAX_AGE_SECONDS },
    'HttpOnly, Secure, SameSite=Strict, the console only',
  )
  t.match(cookie?.value, new RegExp(`^v1\\.${world.owner.id}\\.`), 'it names the user')
})
