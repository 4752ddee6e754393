/**
 * The API description as well-known outside tools read it: Redocly's linter
 * with its recommended rules (redocly.yaml) finds no problem at all, not even
 * a warning, in deploy/openapi.json (and does find them in a copy without a
 * server or a license, so the check can fail); and the typed client's types
 * (examples/openapi.d.ts, openapi-typescript) are the ones the document
 * generates now.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { openApiFile } from '../../scripts/api-document.js'
import { clientTypes, clientTypesFile } from '../../scripts/client-types.js'
import { projectRoot } from '../helpers/processes.js'

interface LintReport {
  totals: { errors: number; warnings: number; ignored: number }
  problems: Array<{ ruleId: string; severity: string; message: string; location: Array<{ pointer: string }> }>
}

/** `redocly lint --format=json` on `file`; it exits 1 on errors (not on warnings), so the report decides. */
async function lint(file: string): Promise<LintReport> {
  const redocly = join(projectRoot, 'node_modules', '.bin', 'redocly')
  const args = ['lint', file, '--config', join(projectRoot, 'redocly.yaml'), '--format=json']
  // No telemetry and no update check: the test reads only the report.
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }
  const result = await promisify(execFile)(redocly, args, { cwd: projectRoot, env, maxBuffer: 16 * 1024 * 1024 }).catch(
    (error: { stdout?: string; stderr?: string }) => {
      if (!error.stdout) throw new Error(`redocly lint failed: ${error.stderr ?? String(error)}`)
      return { stdout: error.stdout }
    },
  )
  return JSON.parse(result.stdout) as LintReport
}

const committed = readFileSync(openApiFile, 'utf8')

t.test("deploy/openapi.json lints clean under Redocly's recommended rules", async (t) => {
  const report = await lint(openApiFile)
  const problems = report.problems.map((problem) => `${problem.severity} ${problem.ruleId} at ${problem.location[0]?.pointer}: ${problem.message}`)
  t.same(problems, [], 'no error and no warning')
  t.same(report.totals, { errors: 0, warnings: 0, ignored: 0 })
})

t.test('the lint does find problems: a copy without a server or a license', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'openapi-lint-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const broken = JSON.parse(committed) as { servers?: unknown; info: { license?: unknown } }
  delete broken.servers
  delete broken.info.license
  const file = join(dir, 'openapi.json')
  writeFileSync(file, JSON.stringify(broken))
  const report = await lint(file)
  t.same(report.problems.map((problem) => problem.ruleId).sort(), ['info-license', 'no-empty-servers'])
})

t.test('examples/openapi.d.ts is what npm run openapi generates from the document now', async (t) => {
  const fresh = await clientTypes(JSON.parse(committed) as object)
  t.ok(fresh === readFileSync(clientTypesFile, 'utf8'), 'current (run npm run openapi)')
  t.match(fresh, /export interface components/)
  t.notMatch(fresh, /agency_id|sub_account_id/, 'the tenant fields the gateway ignores are left out of the types')
})
