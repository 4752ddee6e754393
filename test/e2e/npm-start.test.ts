/**
 * `npm start` on this checkout with no configuration at all: embedded
 * Postgres, a development certificate, no Redis. Drives it as a newcomer
 * would, with the CLI and curl-like HTTPS requests: the banner's commands,
 * many new keys used at once on their first use while ctl works beside them
 * (issue 33: the embedded Postgres is one session shared by every
 * connection), and the README's shell examples; then stops it with Ctrl-C.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Agent, request } from 'undici'
import { childEnv, projectRoot, runCtl } from '../helpers/processes.js'
import { readmeExamples, runShellExamples } from '../helpers/readme-examples.js'

const insecure = new Agent({ connect: { rejectUnauthorized: false } })

async function get(path: string, key: string): Promise<{ status: number; body: unknown; retryAfter: unknown }> {
  const response = await request(`https://127.0.0.1:8443${path}`, { headers: { authorization: `Bearer ${key}` }, dispatcher: insecure })
  return { status: response.statusCode, body: await response.body.json(), retryAfter: response.headers['retry-after'] }
}

/** Rounds of new keys made with ctl (several at once), each used at once from several clients on its first use, ctl listing beside them. */
async function firstUses(ctl: (args: string[]) => Promise<Record<string, string>>, subAccountId: string): Promise<string[]> {
  const answers: string[] = []
  for (let round = 0; round < 4; round++) {
    const made = await Promise.all([0, 1, 2].map((i) => ctl(['key', 'create', '--sub-account', subAccountId, '--name', `burst ${round}.${i}`])))
    const uses = made.flatMap((key) => [0, 1, 2, 3].map(() => get('/v1/agents', key['key']!)))
    const [results] = await Promise.all([Promise.all(uses), ctl(['key', 'list', '--sub-account', subAccountId])])
    answers.push(...results.map((result) => (result.status === 200 ? '200' : `${result.status} ${JSON.stringify(result.body)}`)))
  }
  return answers
}

t.test('npm start runs the whole stack with no configuration', async (t) => {
  // The logs are appended to, run after run: this run's lines are those after this offset.
  const gatewayLog = join(projectRoot, '.data/logs/gateway.log')
  const logStart = statSync(gatewayLog, { throwIfNoEntry: false })?.size ?? 0
  const stack = spawn('npm', ['start'], { cwd: projectRoot, env: childEnv({}), stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let output = ''
  stack.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()))
  stack.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()))
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => stack.on('exit', (code, signal) => resolve({ code, signal })))
  let ended = false
  void exited.then(() => (ended = true))
  t.teardown(() => {
    if (!ended) process.kill(-stack.pid!, 'SIGKILL')
  })
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start not ready:\n${output}`)), 120_000)
    const check = (): void => {
      if (output.includes('Ctrl-C stops everything.')) {
        clearTimeout(timer)
        resolve()
      }
    }
    stack.stdout.on('data', check)
    void exited.then(({ code }) => reject(new Error(`npm start exited ${code}:\n${output}`)))
  })
  t.match(output, /https:\/\/localhost:8443/, 'the banner shows the API URL')
  t.match(output, /ctl -- agency create/, 'the banner shows how to make a first agency')
  t.match(output, /ctl -- key create --sub-account S /, 'a sub-account key')
  t.match(output, /ctl -- key create --agency A /, 'and an agency key')
  t.match(output, /the key is its "key"/, 'and where the key is in ctl’s answer')

  const ctl = async (args: string[]): Promise<Record<string, string>> => {
    const result = await runCtl(args, {})
    t.equal(result.status, 0, `ctl ${args.slice(0, 2).join(' ')}: ${result.stderr}`)
    return result.json as Record<string, string>
  }
  const agency = await ctl(['agency', 'create', '--name', 'Quick Start'])
  const sub = await ctl(['sub-account', 'create', '--agency', agency['id']!, '--name', 'First'])
  const key = await ctl(['key', 'create', '--sub-account', sub['id']!, '--name', 'first key'])

  const listed = await get('/v1/agents', key['key']!)
  t.equal(listed.status, 200)
  t.match(listed.body, { success: true, data: [], pagination: { limit: 20, hasMore: false } })
  const agencyKey = await ctl(['key', 'create', '--agency', agency['id']!, '--name', 'agency key'])
  t.match(await get('/v1/agency', agencyKey['key']!), { status: 200, body: { success: true, data: { id: agency['id'] } } }, 'an agency key, made with ctl')

  const answers = await firstUses(ctl, sub['id']!)
  t.same(
    answers.filter((answer) => answer !== '200'),
    [],
    `${answers.length} first uses of new keys, several at once with ctl beside them: every one 200`,
  )
  const logged = readFileSync(gatewayLog).subarray(logStart).toString()
  t.notMatch(logged, /already exists|key store unavailable/, 'no statement collided in the shared session, no lookup failed')
  const ready = await request('http://127.0.0.1:9090/readyz')
  t.match(await ready.body.json(), { status: 'ready', checks: { keyLookup: true } }, 'ready, the key lookup included')

  const dir = mkdtempSync(join(tmpdir(), 'npm-start-readme-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const shell = await runShellExamples(readmeExamples(), { subAccountId: sub['id']! }, dir)
  t.equal(shell.status, 0, `the README's shell examples run as written: ${shell.stderr}`)
  t.equal(shell.stdout.split('\n').filter((line) => line !== '').length, 4, `each answer on a line of its own:\n${shell.stdout}`)
  t.match(shell.stdout, /"name":"Ada"/)

  await ctl(['key', 'revoke', key['id']!])
  const revoked = await get('/v1/agents', key['key']!)
  t.equal(revoked.status, 401, 'the revoke takes effect on the very next request')
  t.same(revoked.body, { success: false, message: 'Invalid or revoked API key' })

  // Ctrl-C in a terminal signals the whole foreground process group: npm, its shell and the stack.
  process.kill(-stack.pid!, 'SIGINT')
  const { code, signal } = await exited
  t.ok(code === 0 || signal === 'SIGINT', `npm start ends on Ctrl-C (code ${code}, signal ${signal})`)
  for (const port of [8443, 8080, 9090, 4001, 4002, 25432]) {
    t.equal(await closedWithin(port, 20_000), true, `nothing is left listening on ${port}`)
  }
  t.match(output, /stopping…/)
})

/** npm may end before the stack has finished stopping; give it a moment. */
async function closedWithin(port: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (!(await listening(port))) return true
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return false
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    socket.once('connect', () => (socket.destroy(), resolve(true)))
    socket.once('error', () => resolve(false))
  })
}
