-- Each category under a root of the category tree, with its root, depth and path: a
-- recursive CTE over a parent-child table. A moved or removed category changes its whole
-- subtree's rows; duckstream carries such changes down the tree (semi-naive evaluation)
-- rather than recomputing the tree. The tree is shallow: a run fails, naming the setting,
-- if the walk goes deeper than 50 steps (a cycle under UNION ALL never ends).
{{ config(ivm_max_recursion_depth=50) }}
with recursive tree (category_id, root_id, depth, path) as (
    select category_id, category_id, 0, name
    from {{ source('shop', 'categories') }}
    where parent_id is null
    union all
    select c.category_id, tree.root_id, tree.depth + 1, tree.path || ' > ' || c.name
    from tree
    join {{ source('shop', 'categories') }} as c on c.parent_id = tree.category_id
)
select category_id, root_id, depth, path
from tree
