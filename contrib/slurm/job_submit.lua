--[[
job_submit.lua for sites running wattbatch (JobSubmitPlugins=lua in slurm.conf; the file
goes next to slurm.conf). It runs inside slurmctld, so what it writes is out of users' reach:
it records in the job's AdminComment (which only an administrator can change) who submitted
the job, what the job declared at submission and what wattbatch decided:

  AdminComment=wb:uid=1000;declared_app=bert;tagged=1;policy=eaco;share=shard:1;cap=200

`declared_app` is the `app=` of the comment, `tagged` whether the comment carried a wattbatch
`wb:` tag, `policy`, `share`, `cap` (the GPU power cap in W the policy chose; the node side
applies it, see slurm_plugin/node/power_cap.py), `nice` (the job's own `--nice`, which a queue
tier set later is added to), `slack` (how many seconds the user let the
start move, `--wb-slack`) and `elastic` (the GPU range MIN-MAX the job may be resized within,
`--wb-elastic`), `batch` and `lr` (the global batch sizes the scheduler may choose from and the
job's learning-rate rule, `--wb-batch-size`, `--wb-lr-scaling`) that tag's. All are hints (any user can write any comment),
never credentials; recorded here they cannot be changed after the fact (`scontrol update
Comment=...` by the user leaves the AdminComment as it was). wattbatch's tag (the one word of
the comment that starts with `wb:`) is taken out of the comment, so the job keeps exactly the
comment its user gave. If REQUIRE_WATTBATCH is true, GPU jobs without the tag are refused.
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
  local tag = string.match(" " .. comment, "%s(wb:%S*)")
  local app = (tag and string.match(tag, "[:;]app=([%w%._%-]+)"))
      or string.match(comment, "app=([%w%._%-]+)") or ""
  local record = string.format("wb:uid=%d;declared_app=%s;tagged=%d",
                               submit_uid, app, tagged and 1 or 0)
  if tag then
    for _, key in ipairs({"policy", "share", "cap", "nice", "slack", "elastic", "batch", "lr"}) do
      local value = string.match(tag, "[:;]" .. key .. "=([^;%s]+)")
      if value then
        record = record .. ";" .. key .. "=" .. value
      end
    end
    local rest = string.gsub(" " .. comment, "%s+wb:%S*", "", 1)
    job_desc.comment = string.gsub(rest, "^%s+", "")
  end
  job_desc.admin_comment = record
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
