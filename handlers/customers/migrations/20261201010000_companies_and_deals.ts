import type { Knex } from 'knex';

/**
 * Companies and deals, one table per record type (server/recordKit.ts): the business fields stay in
 * `data` (JSON text, exactly what the API returns), and the fields the database must enforce are
 * mirrored into typed columns: the upsert key (a company's normalised domain, unique per scope) and
 * the references (a deal's pipeline, stage and company, and a company's owner). Every record table
 * names its private owner `private_owner_id` (sales pipelines' `owner_member_id` is renamed), so the
 * kit reads them all alike.
 *
 * Stage ids become rows (`sales_pipeline_stages`, kept in step with each pipeline's `data.stages`), so
 * that a deal's (pipeline, stage) is a foreign key: removing a stage that deals use, or deleting a
 * pipeline or a company that deals refer to, is refused by the database too, on SQLite and
 * PostgreSQL alike (the service checks first, under row locks, to name the count).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE sales_pipelines RENAME COLUMN owner_member_id TO private_owner_id');

  await knex.schema.createTable('sales_pipeline_stages', (t) => {
    t.string('pipeline_id', 40).notNullable().references('sales_pipelines.id').onDelete('CASCADE');
    t.string('stage_id', 64).notNullable();
    t.primary(['pipeline_id', 'stage_id']);
  });
  const pipelines = await knex('sales_pipelines').select<Array<{ id: string; data: string }>>('id', 'data');
  for (const p of pipelines) {
    const stages = (JSON.parse(p.data) as { stages?: Array<{ id: string }> }).stages ?? [];
    if (stages.length) await knex('sales_pipeline_stages').insert(stages.map((s) => ({ pipeline_id: p.id, stage_id: s.id })));
  }

  await knex.schema.createTable('companies', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('private_owner_id', 40).nullable().references('members.id');
    // data.domain, normalised: the upsert key.
    t.string('domain', 253).nullable();
    // data.owner_member_id: the member responsible for the account (not the private owner).
    t.string('owner_member_id', 40).nullable().references('members.id');
    t.text('data').notNullable();
    t.string('created_by', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.index(['workspace_id', 'updated_at', 'id']);
  });
  // A domain names one company per scope: the workspace's shared companies, or one member's private ones.
  await knex.raw('CREATE UNIQUE INDEX companies_shared_domain ON companies (workspace_id, domain) WHERE private_owner_id IS NULL AND domain IS NOT NULL');
  await knex.raw('CREATE UNIQUE INDEX companies_private_domain ON companies (workspace_id, private_owner_id, domain) WHERE private_owner_id IS NOT NULL AND domain IS NOT NULL');

  await knex.schema.createTable('deals', (t) => {
    t.string('id', 40).primary();
    t.string('workspace_id', 40).notNullable().references('workspaces.id');
    t.string('private_owner_id', 40).nullable().references('members.id');
    t.string('pipeline_id', 40).notNullable().references('sales_pipelines.id');
    t.string('stage_id', 64).notNullable();
    t.string('company_id', 40).nullable().references('companies.id');
    t.text('data').notNullable();
    t.string('created_by', 40).nullable();
    t.bigInteger('created_at').notNullable();
    t.bigInteger('updated_at').notNullable();
    t.foreign(['pipeline_id', 'stage_id']).references(['pipeline_id', 'stage_id']).inTable('sales_pipeline_stages');
    t.index(['workspace_id', 'updated_at', 'id']);
    t.index(['pipeline_id', 'stage_id']);
    t.index(['company_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('deals');
  await knex.schema.dropTableIfExists('companies');
  await knex.schema.dropTableIfExists('sales_pipeline_stages');
  await knex.raw('ALTER TABLE sales_pipelines RENAME COLUMN private_owner_id TO owner_member_id');
}
