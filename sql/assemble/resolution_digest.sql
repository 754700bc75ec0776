-- One digest of what resolving a group's runs takes from outside the group: the known
-- solutions (author, implementation digest), the workload cache (first_case) and the files
-- KernelIndex cannot read. Same inputs, same digest: a group's resolved part is then reused.
SELECT sha256(
    coalesce((SELECT string_agg(concat_ws(chr(31), solution, author, implementation_digest), chr(30)
                                ORDER BY solution) FROM known_solutions), '')
    || chr(29)
    || coalesce((SELECT string_agg(concat_ws(chr(31), workload_key, first.wd, first.op, first.ck), chr(30)
                                   ORDER BY workload_key) FROM first_case), '')
    || chr(29)
    || coalesce((SELECT string_agg(source_file, chr(30) ORDER BY source_file)
                 FROM kernelindex_unreadable_files), '')
) AS resolution_digest
