--[[
job_submit.lua for sites running wattbatch (JobSubmitPlugins=lua in slurm.conf; the file
goes next to slurm.conf). It runs inside slurmctld, so what it writes is out of users' reach:
it records in the job's AdminComment (which only an administrator can change) who submitted
the job and what the job declared at submission:

  AdminComment=wb:uid=1000;declared_app=bert;tagged=1

`declared_app` is the `app=` of the comment and `tagged` whether the comment carried a
wattbatch `wb:` tag. Both are hints (any user can write any comment), never credentials;
recorded here they cannot be changed after the fact (`scontrol update Comment=...` by the
user leaves the AdminComment as it was). The user's comment itself is left untouched.
If REQUIRE_WATTBATCH is true, GPU jobs whose comment has no `wb:` tag are refused.
]]

local REQUIRE_WATTBATCH = false

local function wants_gpu(job_desc)
  local tres = (job_desc.tres_per_node or "") .. (job_desc.tres_per_job or "")
  return string.find(tres, "gpu") ~= nil or string.find(tres, "shard") ~= nil
      or string.find(tres, "mps") ~= nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local comment = job_desc.comment or ""
  local tagged = string.find(comment, "wb:", 1, true) ~= nil
  if REQUIRE_WATTBATCH and not tagged and wants_gpu(job_desc) then
    slurm.log_user("GPU jobs on this cluster are submitted with wattbatch (same options as sbatch)")
    return slurm.ERROR
  end
  local app = string.match(comment, "app=([%w%._%-]+)") or ""
  job_desc.admin_comment = string.format("wb:uid=%d;declared_app=%s;tagged=%d",
                                         submit_uid, app, tagged and 1 or 0)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
