/**
 * `npm run openapi`: writes deploy/openapi.json, the OpenAPI 3.1 description
 * of the public API, from the services' route schemas and the route map
 * (scripts/api-document.ts), and the typed client's types generated from it,
 * examples/openapi.d.ts (scripts/client-types.ts). `npm run openapi -- --check`
 * writes nothing and exits 1 when either file is stale. ROUTES_FILE names another route map
 * (deploy/routes.yaml by default). Needs no database and no Redis.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { relative } from 'node:path'
import { projectRoot } from '../test/helpers/processes.js'
import { buildApiDocument, defaultRoutesFile, formatApiDocument, openApiFile } from './api-document.js'
import { clientTypes, clientTypesFile } from './client-types.js'

function current(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch {
    // Missing: stale.
    return ''
  }
}

async function main(): Promise<number> {
  const check = process.argv.includes('--check')
  const routesFile = process.env['ROUTES_FILE'] || defaultRoutesFile
  const { document, problems } = await buildApiDocument(routesFile)
  for (const problem of problems) process.stderr.write(`openapi: ${problem}\n`)
  if (problems.length > 0) return 1
  const files: Array<[string, string]> = [
    [openApiFile, formatApiDocument(document)],
    [clientTypesFile, await clientTypes(document)],
  ]
  if (check) {
    const stale = files.filter(([file, text]) => current(file) !== text).map(([file]) => relative(projectRoot, file))
    for (const file of stale) process.stderr.write(`openapi: ${file} is stale; run npm run openapi\n`)
    return stale.length === 0 ? 0 : 1
  }
  for (const [file, text] of files) writeFileSync(file, text)
  const operations = Object.values(document.paths).reduce((count, item) => count + Object.keys(item).length, 0)
  const written = files.map(([file]) => relative(projectRoot, file)).join(' and ')
  process.stdout.write(`wrote ${written}: ${Object.keys(document.paths).length} paths, ${operations} operations\n`)
  return 0
}

main().then(
  (status) => process.exit(status),
  (error: unknown) => {
    process.stderr.write(`openapi: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)
