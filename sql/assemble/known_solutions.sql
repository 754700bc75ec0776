-- Solutions a run can resolve to: those whose definition is in the dataset (KernelIndex skips
-- a solution of an unknown definition), with the author and implementation digest that runs
-- take from them.
SELECT i.solution, i.author, i.implementation_digest
FROM implementations AS i
JOIN definitions AS d USING (definition)
