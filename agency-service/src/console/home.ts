/** The console's first page after sign-in: the user's agencies and, in each, the settings whose keys they may see. */
import type { FastifyInstance } from 'fastify'
import type { Pool } from '@scoped/shared/db'
import type { ConsoleHome } from './access.js'
import { consoleHome, managesAgency } from './access.js'
import { sessionOf } from './authenticate.js'
import { sendPage } from './error-page.js'
import { html } from './html.js'
import { page } from './layout.js'
import type { ConsolePaths } from './paths.js'
import { consoleRoutes } from './paths.js'
import type { ConsoleSession } from './sessions.js'

const roleNames = { owner: 'Owner', admin: 'Admin', member: 'Member' } as const

function homePage(paths: ConsolePaths, session: ConsoleSession, home: ConsoleHome): string {
  const agencies = home.agencies.map(
    (agency) => html`<li class="panel">
  <h2 id="agency-${agency.id}">${agency.name}</h2>
  <p class="hint">Your role: ${roleNames[agency.role]}</p>
  <ul aria-labelledby="agency-${agency.id}">
    <li><a href="${paths.agencyKeys(agency.id)}">Agency settings: API keys</a>${
      !managesAgency(agency.role) && html` <span class="hint">(view only)</span>`
    }</li>
    ${agency.role === 'owner' && html`<li><a href="${paths.agencyMembers(agency.id)}">Agency settings: members</a></li>`}
    ${agency.subAccounts.map((sub) => html`<li><a href="${paths.subAccountKeys(sub.id)}">${sub.name}: sub-account settings, API keys</a></li>`)}
  </ul>
</li>`,
  )
  return page({
    paths,
    title: 'Console',
    session,
    body: html`<h1>Your agencies</h1>
${home.agencies.length === 0 ? html`<p>You do not belong to any agency yet. Ask an agency owner to add you.</p>` : html`<ul class="card-list">${agencies}</ul>`}`,
  })
}

export async function homeRoutes(app: FastifyInstance, options: { pool: Pool; paths: ConsolePaths }): Promise<void> {
  app.get(consoleRoutes.home, async (request, reply) => {
    const session = sessionOf(request)
    return sendPage(reply, 200, homePage(options.paths, session, await consoleHome(options.pool, session.userId)))
  })
}
