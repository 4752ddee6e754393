/**
 * Sign-in under a flood (issue 26): strangers from 200 distinct IPv6 /64s
 * try wrong passwords at once while the owner, in a browser that signed in
 * before (a known device), signs in with the right one. The owner goes
 * first: at most the strangers' small budget of password checks is ever
 * ahead of them, and every stranger past it is refused at once (429), never
 * queued. Aggregate allowances per /48 and per /24 stop one site spreading
 * its guesses over many addresses. The assertions are on order and bounds,
 * never on time (the machine is small and shared); the owner's time is
 * printed as a comment for docs/operations.md.
 */
import t from 'tap'
import { DEVICE_COOKIE } from '@scoped/agency-service/console/device-cookie'
import { STRANGER_PLACES, SignInLine } from '@scoped/agency-service/console/sign-in-line'
import { MAX_FAILURES_PER_NETWORK, networkKey, SignInThrottle, signInSubjects } from '@scoped/agency-service/console/sign-in-throttle'
import { SIGN_IN_BUSY_MESSAGE } from '@scoped/agency-service/console/sign-in'
import { createTestDatabase } from '../helpers/database.js'
import { ConsoleClient, createWorld, csrfToken, startConsole } from './console-harness.js'

const WRONG = 'definitely not the password'
const FLOOD = 200

t.test('200 strangers from 200 /64s at once: the owner with a known device is signed in ahead of them; the rest refused at once', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  const owner = new ConsoleClient(app, '198.51.100.7')
  t.equal((await owner.signIn(world.owner.email)).statusCode, 303, 'an earlier sign-in from this browser')
  t.ok(owner.jar.has(DEVICE_COOKIE), 'made it a known device')
  await owner.submit('/console', '/console/sign-out')
  const ownerForm = { csrf: csrfToken((await owner.get('/console/sign-in')).body), email: world.owner.email, password: 'correct horse battery staple' }

  // Each stranger with its own form token, from its own /64 (all in one /48, as one site's would be).
  const strangers = await Promise.all(
    Array.from({ length: FLOOD }, async (_, i) => {
      const client = new ConsoleClient(app, `2001:db8:0:${(i + 1).toString(16)}::1`)
      return { client, csrf: csrfToken((await client.get('/console/sign-in')).body) }
    }),
  )
  const answered: string[] = []
  const flood = strangers.map(({ client, csrf }, i) =>
    client.post('/console/sign-in', { csrf, email: i % 2 === 0 ? world.owner.email : `nobody${i}@example.test`, password: WRONG }).then((response) => {
      answered.push(String(response.statusCode))
      return response
    }),
  )
  const started = Date.now()
  const ownerAnswer = owner.post('/console/sign-in', ownerForm).then((response) => {
    answered.push('owner')
    return response
  })
  const signedIn = await ownerAnswer
  const ownerMs = Date.now() - started
  const responses = await Promise.all(flood)

  t.equal(signedIn.statusCode, 303, 'the owner is signed in')
  t.equal(signedIn.headers.location, '/console')
  const checkedBefore = answered.slice(0, answered.indexOf('owner')).filter((status) => status === '401').length
  t.ok(checkedBefore <= STRANGER_PLACES, `at most the strangers' budget of password checks went before the owner (${checkedBefore})`)
  const refused = responses.filter((response) => response.statusCode === 429)
  const checked = responses.filter((response) => response.statusCode === 401)
  t.equal(refused.length + checked.length, FLOOD, 'every stranger was refused: 429 at once or 401 after a check')
  t.ok(checked.length <= STRANGER_PLACES, `no more strangers were checked than the budget (${checked.length})`)
  for (const response of refused) {
    if (response.headers['retry-after'] === undefined || !response.body.includes(SIGN_IN_BUSY_MESSAGE)) t.fail('a 429 without Retry-After or its message')
  }
  t.comment(`the owner was signed in ${ownerMs} ms after the flood of ${FLOOD} began (${checked.length} strangers checked, ${refused.length} refused at once)`)
})

t.test('the line: known devices go first, strangers past their budget are refused at once, and places come back', async (t) => {
  const line = new SignInLine({ strangerPlaces: 2, knownDevicePlaces: 2 })
  const order: string[] = []
  const running = line.enter('stranger')!
  await running.turn
  const waitingStranger = line.enter('stranger')!
  t.equal(line.enter('stranger'), undefined, 'a third stranger is refused at once')
  const known = line.enter('known-device')!
  void waitingStranger.turn.then(() => order.push('stranger'))
  void known.turn.then(() => order.push('known device'))
  running.leave()
  await known.turn
  t.same(order, ['known device'], 'the known device took the turn, though the stranger came first')
  known.leave()
  await waitingStranger.turn
  t.same(order, ['known device', 'stranger'], 'then the stranger')
  waitingStranger.leave()
  waitingStranger.leave()
  t.equal(line.count('stranger'), 0, 'leaving twice gives back one place')
  const again = line.enter('stranger')
  t.ok(again, 'places come back')
  await again!.turn
  const gaveUp = line.enter('known-device')!
  gaveUp.leave()
  again!.leave()
  t.equal(line.count('known-device'), 0, 'one that left before its turn is out of the line')
  const next = line.enter('stranger')!
  await next.turn
  next.leave()
})

t.test(`aggregate allowances: ${MAX_FAILURES_PER_NETWORK} failures per IPv6 /48 and per IPv4 /24, whatever the /64 or address`, async (t) => {
  const db = await createTestDatabase(t)
  const throttle = new SignInThrottle(db.pool)
  const now = new Date()
  t.equal(networkKey('2001:db8:7:1234::1'), '2001:db8:7::/48')
  t.equal(networkKey('198.51.100.23'), '198.51.100.0/24')
  for (const [network, address, neighbour, elsewhere] of [
    ['IPv6 /48', (i: number) => `2001:db8:7:${(i + 1).toString(16)}::1`, '2001:db8:7:ffff::1', '2001:db8:8::1'],
    ['IPv4 /24', (i: number) => `198.51.100.${i + 1}`, '198.51.100.250', '198.51.101.1'],
  ] as const) {
    for (let i = 0; i < MAX_FAILURES_PER_NETWORK; i++) {
      const attempt = await throttle.begin(signInSubjects(`someone${i}@example.test`, address(i), undefined), now)
      if (!attempt.allowed) {
        t.fail(`${network}: failure ${i + 1} was refused`)
        break
      }
      await throttle.failed(attempt)
    }
    const neighbourAttempt = await throttle.begin(signInSubjects('fresh@example.test', neighbour, undefined), now)
    t.equal(neighbourAttempt.allowed, false, `${network}: a fresh client of the same network is refused`)
    const other = await throttle.begin(signInSubjects('fresh@example.test', elsewhere, undefined), now)
    t.equal(other.allowed, true, `${network}: a client of another network is not`)
    if (other.allowed) throttle.abandoned(other)
    const device = await throttle.begin(signInSubjects('fresh@example.test', neighbour, { userId: 'u', deviceId: 'd' }), now)
    t.equal(device.allowed, true, `${network}: a known device in the same network is judged on its own record`)
    if (device.allowed) throttle.abandoned(device)
  }
})
