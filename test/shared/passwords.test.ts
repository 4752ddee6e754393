/**
 * Console passwords: scrypt at OWASP's parameters (N = 2^17, r = 8, p = 1),
 * hashes of an older cost upgraded at the next sign-in, one maximum length
 * for ctl and the sign-in form, the bundled list of common passwords, and the
 * terminal prompt that never echoes.
 */
import t from 'tap'
import { EventEmitter } from 'node:events'
import { readFileSync } from 'node:fs'
import { PassThrough } from 'node:stream'
import type { ReadStream } from 'node:tty'
import { fileURLToPath } from 'node:url'
import {
  hashPassword,
  isCommonPassword,
  MAX_PASSWORD_LENGTH,
  MIN_PASSWORD_LENGTH,
  needsRehash,
  PASSWORD_COST,
  passwordProblem,
  verifyPassword,
} from '@scoped/shared/passwords'
import { readHiddenLine, readPassword } from '@scoped/agency-service/password-prompt'
import { ConsoleClient, createWorld, PASSWORD, startConsole } from '../console/console-harness.js'
import { runCtl } from '../helpers/processes.js'
import { createTestDatabase } from '../helpers/database.js'

t.test('hashes at OWASP cost, verifies, and knows a weaker hash when it sees one', async (t) => {
  t.same(PASSWORD_COST, { N: 2 ** 17, r: 8, p: 1 })
  const stored = await hashPassword('a long and private passphrase')
  t.match(
    stored,
    /^scrypt\$131072\$8\$1\$[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}$/,
    'N = 2^17 (128 MiB, above Node’s default maxmem), r = 8, p = 1, 16-byte salt, 32-byte hash',
  )
  t.equal(await verifyPassword('a long and private passphrase', stored), true)
  t.equal(await verifyPassword('a long and private passphrasE', stored), false)
  t.equal(needsRehash(stored), false, 'today’s cost needs nothing')
  const weak = await hashPassword('a long and private passphrase', { N: 16384, r: 8, p: 1 })
  t.equal(await verifyPassword('a long and private passphrase', weak), true, 'an older cost still verifies')
  t.equal(needsRehash(weak), true, 'and is to be replaced')
  for (const junk of [
    '',
    'scrypt$16384$8$1$salt',
    'bcrypt$2b$10$x',
    'scrypt$99999999$8$1$AAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
    'scrypt$1000$8$1$AAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
  ]) {
    t.equal(await verifyPassword('anything at all', junk), false, `malformed or absurd: ${junk.slice(0, 24)}`)
    t.equal(needsRehash(junk), true)
  }
  t.equal(await verifyPassword('x'.repeat(MAX_PASSWORD_LENGTH + 1), stored), false, 'past the maximum length nothing is checked')
})

t.test('the rules of a new password: length both ways, and not a common one', async (t) => {
  t.equal(passwordProblem('a long and private passphrase'), undefined)
  t.equal(passwordProblem('x'.repeat(MAX_PASSWORD_LENGTH)), undefined, 'the maximum itself is fine')
  t.match(passwordProblem('short'), `at least ${MIN_PASSWORD_LENGTH} characters`)
  t.match(passwordProblem('x'.repeat(MAX_PASSWORD_LENGTH + 1)), `at most ${MAX_PASSWORD_LENGTH} characters`)
  for (const common of ['password1234', 'qwertyuiop', 'Password1234', 'QWERTYUIOP', '1234567890']) {
    t.match(passwordProblem(common), 'one of the most common passwords', `${common} is refused, whatever its case`)
  }
  const list = readFileSync(fileURLToPath(new URL('../../shared/data/common-passwords.txt', import.meta.url)), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
  t.ok(list.length >= 10_000, `the bundled list has ${list.length} entries`)
  t.ok(
    list.every((line) => line === line.toLowerCase()),
    'lower-case, so matching ignores case',
  )
  t.ok(isCommonPassword(list[0]!) && isCommonPassword(list.at(-1)!), 'every entry is recognised')
})

t.test('a stored hash of an older cost is replaced at the next successful sign-in', async (t) => {
  const { app, pool } = await startConsole(t)
  const world = await createWorld(pool)
  await pool.query(`UPDATE users SET password_hash = $2 WHERE id = $1`, [world.owner.id, await hashPassword(PASSWORD, { N: 1024, r: 8, p: 1 })])
  t.equal((await new ConsoleClient(app, '198.51.100.1').signIn(world.owner.email, 'not it at all')).statusCode, 401, 'a failed sign-in changes nothing')
  t.match((await pool.query(`SELECT password_hash FROM users WHERE id = $1`, [world.owner.id])).rows[0].password_hash, /^scrypt\$1024\$/)
  t.equal((await new ConsoleClient(app, '198.51.100.1').signIn(world.owner.email)).statusCode, 303)
  const upgraded = (await pool.query<{ password_hash: string }>(`SELECT password_hash FROM users WHERE id = $1`, [world.owner.id])).rows[0]!.password_hash
  t.match(upgraded, /^scrypt\$131072\$8\$1\$/, 'rehashed at today’s cost')
  t.equal(await verifyPassword(PASSWORD, upgraded), true)
  t.equal((await new ConsoleClient(app, '198.51.100.2').signIn(world.owner.email)).statusCode, 303, 'and signs in with it')
})

t.test('ctl user create refuses common, short and over-long passwords with a clear message', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url }
  const agency = (await runCtl(['agency', 'create', '--name', 'Rules'], env)).json as { id: string }
  const create = (email: string, password: string): ReturnType<typeof runCtl> =>
    runCtl(['user', 'create', '--email', email, '--agency', agency.id, '--role', 'owner'], env, `${password}\n`)
  for (const [password, message] of [
    ['Password1234', 'password is one of the most common passwords (it would be guessed first): choose another'],
    ['short', `password must be at least ${MIN_PASSWORD_LENGTH} characters`],
    ['y'.repeat(MAX_PASSWORD_LENGTH + 1), `password must be at most ${MAX_PASSWORD_LENGTH} characters`],
  ] as const) {
    const result = await create('someone@rules.test', password)
    t.equal(result.status, 1)
    t.same(result.json, { success: false, message }, message)
  }
  t.equal((await create('someone@rules.test', 'a long and private passphrase')).status, 0, 'a good one is taken (read from stdin, the newline dropped)')
})

/** A stand-in for a terminal: records raw mode and what is written to it. */
class FakeTty extends EventEmitter {
  isTTY = true
  isRaw = false
  rawModes: boolean[] = []
  setRawMode(mode: boolean): this {
    this.isRaw = mode
    this.rawModes.push(mode)
    return this
  }
  setEncoding(): this {
    return this
  }
  resume(): this {
    return this
  }
  pause(): this {
    return this
  }
  type(text: string): void {
    setImmediate(() => this.emit('data', text))
  }
}

t.test('on a terminal the password is read with echo off, twice', async (t) => {
  const tty = new FakeTty()
  const screen = new PassThrough()
  let shown = ''
  screen.on('data', (chunk: Buffer) => (shown += chunk.toString()))
  const line = readHiddenLine(tty as unknown as ReadStream, screen, 'password: ')
  tty.type('secret-ish\u007f\u007fsh pass\r')
  t.equal(await line, 'secret-ish pass', 'backspace works')
  t.same(tty.rawModes, [true, false], 'raw mode (no echo) while typing, restored after')
  t.equal(shown, 'password: \n', 'only the prompt and a newline reach the screen, never a character typed')

  const twice = new FakeTty()
  const typed = readPassword('password', { stdin: twice as unknown as NodeJS.ReadableStream & { isTTY: boolean }, stderr: new PassThrough() })
  twice.type('same thing 1\r')
  setTimeout(() => twice.type('same thing 2\r'), 20)
  await t.rejects(typed, /the two entries differ/, 'a typo between the two entries is caught')

  const cancelled = new FakeTty()
  const aborted = readHiddenLine(cancelled as unknown as ReadStream, new PassThrough(), 'password: ')
  cancelled.type('abc\u0003')
  await t.rejects(aborted, /cancelled/, 'Ctrl-C cancels')
  t.equal(cancelled.isRaw, false, 'and the terminal is restored')
})
