--[[
job_submit.lua for sites running wattbatch (JobSubmitPlugins=lua in slurm.conf; the file
goes next to slurm.conf). Jobs submitted with plain sbatch carry no "wb:" tag in their
comment; this marks them "wb:policy=none" so that `wattctl reconcile` and the reports can tell
them apart, and (if REQUIRE_WATTBATCH is true) refuses GPU jobs that bypass wattbatch.
Nothing here changes a job that wattbatch submitted.
]]

local REQUIRE_WATTBATCH = false

local function wants_gpu(job_desc)
  local tres = (job_desc.tres_per_node or "") .. (job_desc.tres_per_job or "")
  return string.find(tres, "gpu") ~= nil or string.find(tres, "shard") ~= nil
      or string.find(tres, "mps") ~= nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local comment = job_desc.comment or ""
  if string.find(comment, "wb:", 1, true) then
    return slurm.SUCCESS
  end
  if REQUIRE_WATTBATCH and wants_gpu(job_desc) then
    slurm.log_user("GPU jobs on this cluster are submitted with wattbatch (same options as sbatch)")
    return slurm.ERROR
  end
  if comment == "" then
    job_desc.comment = "wb:policy=none"
  else
    job_desc.comment = comment .. " wb:policy=none"
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

return slurm.SUCCESS
