/** Row types of the customers' tables (migrations/ here, and sales_pipelines from the platform's foundation). */
import type { DbBoolean, DbRecordRow } from '../../db/rows.ts';

export interface DbSalesPipelineRow extends DbRecordRow {
  name: string;
  is_default: DbBoolean;
}

/** A stage id of a pipeline (mirrors `data.stages`), so that deals can refer to it by foreign key. */
export interface DbSalesPipelineStageRow {
  pipeline_id: string;
  stage_id: string;
}

export interface DbCompanyRow extends DbRecordRow {
  /** `data.domain`, normalised (the upsert key). */
  domain: string | null;
  /** `data.owner_member_id`: the member responsible for the account. */
  owner_member_id: string | null;
}

export interface DbDealRow extends DbRecordRow {
  pipeline_id: string;
  stage_id: string;
  company_id: string | null;
}
