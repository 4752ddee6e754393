/**
 * The README's client examples (issue 33), taken from the README and run as
 * a reader runs them against a real stack (Postgres, Redis, the services
 * and a gateway as processes): the key made with `ctl` and read from its
 * `key` field with jq, curl under `sh` (not bash), Node's fetch, and
 * Python's requests when python3 has it. `npm start`'s test runs the shell
 * ones on the embedded database.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { errorCatalog } from '@scoped/shared/errors'
import { runCtl } from '../helpers/processes.js'
import { pythonMissing, readmeExamples, runNodeExample, runPythonExample, runShellExamples } from '../helpers/readme-examples.js'
import type { ExampleTarget } from '../helpers/readme-examples.js'
import { startStack } from '../helpers/stack.js'

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'

const examples = readmeExamples()
const stack = await startStack(t)
const dir = mkdtempSync(join(tmpdir(), 'readme-examples-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const caFile = join(dir, 'cert.pem')
writeFileSync(caFile, stack.cert)

async function ctl(args: string[]): Promise<Record<string, string>> {
  const result = await runCtl(args, stack.ctlEnv)
  if (result.status !== 0) throw new Error(`ctl ${args.join(' ')}: ${result.stderr}`)
  return result.json as Record<string, string>
}

const agency = await ctl(['agency', 'create', '--name', 'Readme'])
const sub = await ctl(['sub-account', 'create', '--agency', agency['id']!, '--name', 'Examples'])
const target: ExampleTarget = { subAccountId: sub['id']!, api: `https://localhost:${stack.gatewayPorts[0]}`, caFile, env: stack.ctlEnv }

t.test('the README has the examples this test runs', async (t) => {
  t.equal(examples.blocks['sh']?.length, 2, 'the key block and the curl block')
  t.equal(examples.blocks['js']?.length, 1, 'Node')
  t.equal(examples.blocks['python']?.length, 1, 'Python')
  t.notMatch(examples.blocks['sh']!.join('\n'), /<<<|\[\[|\bfunction\b|\$\{[^}]*\/\//, 'no bash-isms in the shell examples')
})

t.test('the shell examples under sh: the key from ctl’s "key", then each curl answer on a line of its own', async (t) => {
  const result = await runShellExamples(examples, target, dir)
  t.equal(result.status, 0, `sh exits 0: ${result.stderr}`)
  t.equal(result.stderr, '', 'nothing on stderr')
  const lines = result.stdout.split('\n').filter((line) => line !== '')
  t.equal(lines.length, 4, `four answers, one per line:\n${result.stdout}`)
  t.match(JSON.parse(lines[0]!), { success: true, data: [], pagination: { limit: 2, nextCursor: null, hasMore: false } }, 'the list')
  const created = JSON.parse(lines[1]!) as { success: boolean; data: { id: string; name: string } }
  t.match(created, { success: true, data: { name: 'Ada' } }, 'the agent made')
  t.same(JSON.parse(lines[2]!), { success: false, message: errorCatalog.missingKey.message }, 'no key: 401')
  t.equal(lines[3], `${created.data.id} Ada`, 'every agent, page by page')
})

t.test('the Node example', async (t) => {
  const { key } = await ctl(['key', 'create', '--sub-account', sub['id']!, '--name', 'node example'])
  const result = await runNodeExample(examples, target, key!, dir)
  t.equal(result.status, 0, `node exits 0: ${result.stderr}`)
  const made = new RegExp(`^created (${UUID})$`, 'm').exec(result.stdout)
  t.ok(made, `prints the agent it made:\n${result.stdout}`)
  t.match(result.stdout, new RegExp(`^${made?.[1]} Ada$`, 'm'), 'and lists it with the others')
  t.equal(result.stdout.match(/ Ada$/gm)?.length, 2, 'every agent of the sub-account, the shell example’s too')
})

const pythonAbsent = pythonMissing()
t.test('the Python example', { skip: pythonAbsent === undefined ? false : `the Python example is not run: ${pythonAbsent}` }, async (t) => {
  const { key } = await ctl(['key', 'create', '--sub-account', sub['id']!, '--name', 'python example'])
  const result = await runPythonExample(examples, target, key!, dir)
  t.equal(result.status, 0, `python3 exits 0: ${result.stderr}`)
  const made = new RegExp(`^created (${UUID})$`, 'm').exec(result.stdout)
  t.ok(made, `prints the agent it made:\n${result.stdout}`)
  t.match(result.stdout, new RegExp(`^${made?.[1]} Ada$`, 'm'), 'and lists it with the others')
  t.equal(result.stdout.match(/ Ada$/gm)?.length, 3, 'every agent of the sub-account')
})
